package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/internal/spin"
	"softgpu/stage0-mailbox/mmio"
)

// This file is the driver's per-channel half: submitting a command on one
// channel and waiting for it. Here a channel is a mailbox (the
// engine's side is device/mailbox.go):
//
//	driver (Submit, under the global lock)    engine
//	encode command into the slot
//	store seq → RegDoorbell  ───────────────► fetch, execute
//	load RegCompletedSeq == seq? ◄──────────── store status, then seq
//	load RegCompletedStatus
//
// A Channel needs only the channel's registers and slot, the lock that
// serialises submissions, and the driver's closed flag: everything
// device-wide stays in Driver.

// Channel is the driver's half of one channel.
type Channel struct {
	id       abi.Channel
	engine   abi.Engine
	regs     *mmio.Registers
	doorbell uint64 // abi.DoorbellPage(id)
	status   uint64 // abi.ChannelStatusPage(id)
	slot     []byte

	yieldEvery int
	closed     *atomic.Bool // the driver's: set by Close
	hooks      *Hooks

	// lock is the global driver lock (Driver.mu): it is held from push
	// to the end of the wait, so the channel has one command in flight
	// and one writer.
	lock    *sync.Mutex
	lastSeq uint64 // sequence number of the last command pushed; guarded by lock
}

// newChannel takes channel c as the device presents it: the sequence
// number from its doorbell — zero on a fresh device, or where an earlier
// driver left it — and waits for that command to complete, so that its
// completion is never mistaken for one of ours. A channel an earlier driver
// left faulted is refused: the device will not serve it again.
func (d *Driver) newChannel(c abi.Channel) (*Channel, error) {
	ch := &Channel{
		id: c, engine: c.Engine(), regs: d.regs,
		doorbell: abi.DoorbellPage(c), status: abi.ChannelStatusPage(c), slot: d.hw.CommandSlot(c),
		yieldEvery: d.yieldEvery, closed: &d.closed, hooks: &d.hooks, lock: &d.mu,
	}
	if len(ch.slot) < abi.CommandSize {
		return nil, fmt.Errorf("%w: %v has a %d-byte command slot", ErrNoDevice, c, len(ch.slot))
	}
	if err := ch.faultError(); err != nil {
		return nil, fmt.Errorf("%w (left so by an earlier driver)", err)
	}
	ch.lastSeq = ch.regs.Load(ch.doorbell + abi.RegDoorbell)
	if err := ch.waitLocked(ch.lastSeq); err != nil {
		return nil, err
	}
	return ch, nil
}

// ID returns the channel's number.
func (ch *Channel) ID() abi.Channel { return ch.id }

// Engine returns the engine that serves the channel.
func (ch *Channel) Engine() abi.Engine { return ch.engine }

// ANCHOR: submit

// Submit runs cmd on the channel and waits for it. A command the device
// refuses comes back as a *CommandError; a command with flag bits this
// stage does not define is refused here, before it reaches the device.
func (ch *Channel) Submit(cmd abi.Command) error {
	if !abi.FlagsDefined(cmd.Flags) {
		return &CommandError{Engine: ch.engine, Op: cmd.Op, Status: abi.StatusBadFlags}
	}
	ch.lock.Lock()
	defer ch.lock.Unlock()
	if ch.closed.Load() {
		return ErrClosed
	}
	if err := ch.faultError(); err != nil {
		return err
	}
	if h := ch.hooks.Reserved; h != nil {
		h(ch.id) // a benchmark may stall the submitter here, holding the lock
	}
	seq := ch.push(cmd)
	if h := ch.hooks.Published; h != nil {
		h(ch.id) // a benchmark may run the engine's side here (device/stepped.go)
	}
	if err := ch.waitLocked(seq); err != nil {
		return err
	}
	if st := abi.Status(ch.regs.Load(ch.status + abi.RegCompletedStatus)); st != abi.StatusOK {
		return &CommandError{Engine: ch.engine, Op: cmd.Op, Seq: seq, Status: st}
	}
	return nil
}

// push places cmd in the channel's slot and rings the doorbell. It
// returns the command's sequence number.
func (ch *Channel) push(cmd abi.Command) uint64 {
	ch.lastSeq++
	cmd.Seq = ch.lastSeq
	// Plain stores into the slot. The engine does not read it until it
	// sees the doorbell change, and the global lock keeps any other
	// submitter out until this command has completed.
	cmd.Encode(ch.slot)
	// This store publishes the slot; the engine's load of RegDoorbell in
	// fetch pairs with it.
	ch.regs.Store(ch.doorbell+abi.RegDoorbell, cmd.Seq)
	return cmd.Seq
}

// waitLocked spins until the engine publishes seq as completed. The load of
// RegCompletedSeq pairs with the engine's store of it in complete, so once
// seq is seen the status the engine stored before it can be read. With one
// command in flight the completed sequence is either the previous one or
// seq, so equality is the whole test.
//
// Every so often it looks at the device's state: once the device has
// stopped (the driver's Close, or the device's), every completion it will
// ever publish is published, so a last look settles it — the command's real
// status if the engine ran it (a DELAY cut short reports
// abi.StatusAborted), ErrClosed if it never took it. A faulted channel ends
// the wait too. Either way, once waitLocked returns the engine is done with
// the command, so the caller may free what the command named.
func (ch *Channel) waitLocked(seq uint64) error {
	yield := spin.NewCadence(ch.yieldEvery)
	for polls := 1; ; polls++ {
		if ch.regs.Load(ch.status+abi.RegCompletedSeq) == seq {
			return nil
		}
		// The yield keeps its own cadence, outside the every-64 block
		// below, so that a YieldEvery that is not a multiple of 64
		// means what it says.
		if yield.Due(polls) {
			runtime.Gosched()
		}
		if polls%64 != 0 {
			continue
		}
		if ch.regs.Load(abi.RegDeviceState) == abi.DeviceStopped {
			if ch.regs.Load(ch.status+abi.RegCompletedSeq) == seq {
				return nil
			}
			return ErrClosed
		}
		if err := ch.faultError(); err != nil {
			return err
		}
	}
}

// ANCHOR_END: submit

// faultError returns an error wrapping ErrChannelFaulted and the
// abi.ChannelFault if the device has stopped serving the channel, or nil.
func (ch *Channel) faultError() error {
	f := abi.ChannelFault(ch.regs.Load(ch.status + abi.RegChannelFault))
	if f == abi.FaultNone {
		return nil
	}
	value := ch.regs.Load(ch.status + abi.RegChannelFaultValue)
	return fmt.Errorf("%w: %v: %w (value %#x)", ErrChannelFaulted, ch.id, f, value)
}
