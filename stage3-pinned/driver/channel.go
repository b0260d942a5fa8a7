package driver

import (
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage3-pinned/abi"
	"softgpu/stage3-pinned/mmio"
)

// This file is the driver's per-channel half: a channel's rings, and the
// state the driver keeps for them. Submitting is in submit.go, waiting
// and reaping in complete.go; the engine's side is device/ring.go.
//
// A Channel needs only the channel's registers and rings, the lock that
// serialises submissions, and the driver's closed flag: everything
// device-wide stays in Driver.
//
// Per channel the driver writes the submission slots and RegDoorbell, and
// reads one thing the engine writes: the completion ring. It keeps:
//
//	tail      the index the next command goes to, and rung, the value
//	          last stored to RegDoorbell (both guarded by lock)
//	owner[k]  the request of the command last written to slot k, if it
//	          was submitted asynchronously and is not yet reaped; nil for
//	          a synchronous Submit, which reaps its own (guarded by lock)
//	freeFor[k] slot k may take command freeFor[k]: the command a lap
//	          before it has been reaped (atomic: stored by its reaper)
//
// Invariants (free-running indices, differences mod 2^64):
//   - the driver writes slot i&mask only when freeFor[i&mask] == i, so a
//     slot — and the completion entry beside it — is reused only after the
//     status of its previous command was read;
//   - exactly one goroutine reaps each command: its synchronous
//     submitter, or for a batch, whoever holds the lock and finds it
//     completed first (its waiter, or a submitter that needs the slot).

// Channel is the driver's half of one channel.
type Channel struct {
	id          abi.Channel
	engine      abi.Engine
	regs        *mmio.Registers
	doorbell    uint64          // abi.DoorbellPage(id)
	status      uint64          // abi.ChannelStatusPage(id)
	slots       []byte          // the submission ring: written by the driver
	completions []atomic.Uint64 // the completion ring: written by the engine
	size        uint64          // entries in each ring, a power of two
	mask        uint64          // size-1

	yieldEvery int
	closed     *atomic.Bool // the driver's: set by Close
	hooks      *Hooks
	doorbells  *atomic.Uint64 // the driver's count of doorbell stores

	// Waiting (fence.go): how, and the blocked waiters.
	waitMode   WaitMode
	pollBudget uint64
	wake       Wake
	stats      *stats
	timeline   timeline
	estimate   copyEstimate // when a synchronous copy will complete (estimate.go)

	// lock is the global driver lock (Driver.mu). It guards the fields
	// below; waiting for a completion takes no lock.
	lock    *sync.Mutex
	tail    uint64
	rung    uint64 // the tail last stored to RegDoorbell, a private shadow of it
	owner   []*request
	freeFor []atomic.Uint64
}

// newChannel takes channel c as the device presents it: the ring size from
// RegRingSize, the rings from the device, and the tail from RegDoorbell —
// the reset value on a fresh device, or where an earlier driver left it.
// It waits until the engine has completed everything below that tail, so
// that every completion it reads from now on is ours. A channel an earlier
// driver left faulted is refused: the device will not serve it again.
func (d *Driver) newChannel(c abi.Channel) (*Channel, error) {
	size := d.regs.Load(abi.RegRingSize)
	if size == 0 || size&(size-1) != 0 {
		return nil, fmt.Errorf("%w: RegRingSize reads %d, not a power of two", ErrNoDevice, size)
	}
	// The rings are checked against the size before anything is made with
	// size entries, since the size is read from the device — and by
	// dividing their lengths, since size*abi.CommandSize wraps for a size
	// of 2^58 or more.
	slots, completions := d.hw.Ring(c), d.hw.Completions(c)
	if uint64(len(slots))/abi.CommandSize != size || uint64(len(completions))/abi.CompletionWords != size {
		return nil, fmt.Errorf("%w: %v's rings (%d and %d bytes) do not match RegRingSize %d",
			ErrNoDevice, c, len(slots), 8*len(completions), size)
	}
	ch := &Channel{
		id: c, engine: c.Engine(), regs: d.regs,
		doorbell: abi.DoorbellPage(c), status: abi.ChannelStatusPage(c),
		slots: slots, completions: completions, size: size, mask: size - 1,
		yieldEvery: d.yieldEvery, closed: &d.closed, hooks: &d.hooks, doorbells: &d.doorbells, lock: &d.mu,
		waitMode: d.waitMode, pollBudget: d.pollBudget, wake: d.wake, stats: &d.stats,
		owner: make([]*request, size), freeFor: make([]atomic.Uint64, size),
	}
	ch.timeline.ch = ch
	ch.estimate.enabled = d.sizedWait
	if err := ch.faultError(); err != nil {
		return nil, fmt.Errorf("%w (left so by an earlier driver)", err)
	}
	ch.tail = ch.regs.Load(ch.doorbell + abi.RegDoorbell)
	ch.rung = ch.tail
	if _, err := ch.awaitCompleted(ch.tail - 1); err != nil {
		return nil, err
	}
	for i := ch.tail; i != ch.tail+size; i++ {
		ch.freeFor[i&ch.mask].Store(i) // every slot is free for the first lap
	}
	return ch, nil
}

// ID returns the channel's number.
func (ch *Channel) ID() abi.Channel { return ch.id }

// Engine returns the engine that serves the channel.
func (ch *Channel) Engine() abi.Engine { return ch.engine }

// mark returns the index the next command submitted on the channel will
// take: every command submitted so far lies below it.
func (ch *Channel) mark() uint64 {
	ch.lock.Lock()
	defer ch.lock.Unlock()
	return ch.tail
}

// passed reports whether the engine has completed every command below
// mark. (The completion entries only grow, so this stays true.)
func (ch *Channel) passed(mark uint64) bool { return ch.completed(mark - 1) }

// stopped reports whether the device has stopped: every completion and
// fence it will ever write is written.
func (ch *Channel) stopped() bool { return ch.regs.Load(abi.RegDeviceState) == abi.DeviceStopped }

// endedErr returns why nothing more of the channel will run, or nil while
// it is served: the device stopped (ErrClosed), or the channel faulted (its
// fault). Every wait checks it, and then settles on what did complete:
// after either, the completions and the timeline are final.
func (ch *Channel) endedErr() error {
	if ch.stopped() {
		return ErrClosed
	}
	return ch.faultError()
}

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
