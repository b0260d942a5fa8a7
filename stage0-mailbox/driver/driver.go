// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device.
//
// It reaches the device only through device.Registers, the command slots and
// device memory (see package device for the mailbox picture).
//
// Locking. Stage 0 has one global lock, Driver.mu, held from the moment a
// submitter claims a mailbox until its command completes. So at most one
// command is in flight on the whole device, and the mailbox protocol never
// sees two writers. The allocator has its own lock (it never touches the
// device). Copies through the aperture take no lock: they are CPU stores into
// memory the caller owns.
package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/device"
)

// ErrClosed is returned by every call made after Close, and by a wait that
// Close interrupted.
var ErrClosed = errors.New("softgpu: device closed")

// ErrNoDevice reports that the registers do not identify a softgpu.
var ErrNoDevice = errors.New("softgpu: no device at these registers")

// CommandError is a command the device refused or could not finish. It wraps
// the device's abi.Status, so errors.Is(err, abi.StatusOutOfRange) works.
type CommandError struct {
	Engine abi.Engine
	Op     abi.Opcode
	Seq    uint64
	Status abi.Status
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("softgpu: %v on the %v engine (seq %d): %s", e.Op, e.Engine, e.Seq, e.Status.String())
}

func (e *CommandError) Unwrap() error { return e.Status }

// ErrNoEngine reports an engine number the device does not have.
var ErrNoEngine = errors.New("softgpu: no such engine")

// Config configures a driver.
type Config struct {
	// YieldEvery is how many polls the driver makes between
	// runtime.Gosched calls while it waits for a completion (the same trade
	// as device.Config.YieldEvery). Zero means 64; negative, never.
	YieldEvery int
}

// Driver drives one device.
type Driver struct {
	dev        *device.Device
	regs       *device.Registers
	memSize    uint64
	yieldEvery int

	alloc  *Allocator
	closed atomic.Bool // set once by Close; checked by every entry point and every wait

	// mu is the global driver lock: it serialises submissions, so one
	// command at a time is in flight on the whole device.
	mu      sync.Mutex
	lastSeq [abi.NumEngines]uint64 // sequence of the last command submitted per engine
}

// New binds a driver to dev. The device may have run commands for an earlier
// driver: New picks up the sequence numbers where the doorbells left them,
// and waits for a command still in flight to finish, so that its completion
// is never mistaken for one of ours.
func New(dev *device.Device, cfg Config) (*Driver, error) {
	regs := dev.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if cfg.YieldEvery == 0 {
		cfg.YieldEvery = device.DefaultYieldEvery
	}
	memSize := regs.Load(abi.RegMemSize)
	d := &Driver{
		dev:        dev,
		regs:       regs,
		memSize:    memSize,
		yieldEvery: cfg.YieldEvery,
		alloc:      NewAllocator(memSize),
	}
	for e := range abi.Engine(abi.NumEngines) {
		bank := abi.EngineRegs(e)
		d.lastSeq[e] = regs.Load(bank + abi.RegDoorbell)
		if err := d.waitLocked(bank, d.lastSeq[e]); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// ANCHOR: submit
// Submit runs cmd on engine e and waits for it. It fills in cmd.Seq. A
// command the device refuses comes back as a *CommandError.
func (d *Driver) Submit(e abi.Engine, cmd abi.Command) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	cmd.Seq = d.pushLocked(e, cmd)
	bank := abi.EngineRegs(e)
	if err := d.waitLocked(bank, cmd.Seq); err != nil {
		return err
	}
	if st := abi.Status(d.regs.Load(bank + abi.RegCompletedStatus)); st != abi.StatusOK {
		return &CommandError{Engine: e, Op: cmd.Op, Seq: cmd.Seq, Status: st}
	}
	return nil
}

// pushLocked places cmd in engine e's mailbox and rings the doorbell. It
// returns the command's sequence number.
func (d *Driver) pushLocked(e abi.Engine, cmd abi.Command) uint64 {
	d.lastSeq[e]++
	cmd.Seq = d.lastSeq[e]
	// Plain stores into the slot. The engine does not read it until it
	// sees the doorbell change, and the global lock keeps any other
	// submitter out until this command has completed.
	cmd.Encode(d.dev.CommandSlot(e))
	// This store publishes the slot; the engine's load of RegDoorbell in
	// fetch pairs with it.
	d.regs.Store(abi.EngineRegs(e)+abi.RegDoorbell, cmd.Seq)
	return cmd.Seq
}

// waitLocked spins until the engine publishes seq as completed. The load of
// RegCompletedSeq pairs with the engine's store of it in complete, so once
// seq is seen the status the engine stored before it can be read. With one
// command in flight the completed sequence is either the previous one or
// seq, so equality is the whole test.
//
// If the driver is closed meanwhile, waitLocked closes the device — which
// waits for the engines to stop — and looks once more: a command the engine
// finished (or aborted) reports its real status, and only a command it never
// took reports ErrClosed. Either way, once waitLocked returns the engine is
// done with the command, so the caller may free what the command named.
func (d *Driver) waitLocked(bank, seq uint64) error {
	checkEvery := d.yieldEvery
	if checkEvery < 0 { // never yield, but still notice Close
		checkEvery = 1024
	}
	for polls := 1; ; polls++ {
		if d.regs.Load(bank+abi.RegCompletedSeq) == seq {
			return nil
		}
		if polls%checkEvery != 0 {
			continue
		}
		if d.closed.Load() {
			d.dev.Close()
			if d.regs.Load(bank+abi.RegCompletedSeq) == seq {
				return nil
			}
			return ErrClosed
		}
		if d.yieldEvery > 0 {
			runtime.Gosched()
		}
	}
}

// ANCHOR_END: submit

// Close stops the device and waits for its engines to stop. A call in
// progress returns its command's real status if the engine got to it (a
// DELAY cut short reports abi.StatusAborted), ErrClosed if it did not; later
// calls return ErrClosed. Close does not take the global lock: a submitter
// holds it while it waits, and Close is what makes that wait end.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.dev.Close()
	return nil
}

// Alloc reserves size bytes of device memory and returns their address.
func (d *Driver) Alloc(size uint64) (uint64, error) {
	if d.closed.Load() {
		return 0, ErrClosed
	}
	return d.alloc.Alloc(size)
}

// Free returns an allocation made by Alloc.
func (d *Driver) Free(addr uint64) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return d.alloc.Free(addr)
}

// MemoryInUse reports the bytes currently allocated.
func (d *Driver) MemoryInUse() uint64 { return d.alloc.InUse() }
