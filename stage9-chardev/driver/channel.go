package driver

import (
	"fmt"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/mmio"
)

// This file is the driver's per-channel half: a channel's rings, and the
// state the driver keeps for them. Submitting is in submit.go, waiting
// and reaping in complete.go; the engine's side is device/ring.go.
//
// A Channel needs only the channel's registers and rings and the driver's
// closed flag to submit and wait: everything device-wide stays in Driver,
// which Close alone reaches (runlist.go).
//
// Per channel the driver writes the submission slots and RegDoorbell, and
// reads one thing the engine writes: the completion ring. The words it
// keeps for them, and who writes each, are in nolock.go.

// Channel is the driver's half of one channel.
type Channel struct {
	d           *Driver // for Close: the runlist is the device's
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
	gone       atomic.Bool  // set by Channel.Close: the channel is leaving its runlist
	removed    atomic.Bool  // set once it has left: no command of it will complete any more
	released   atomic.Bool  // set once its engine has let it go (runlist.go): nothing of it will run any more
	unstarted  atomic.Bool  // opened with ChannelOptions.Start and not yet listed: start holds the call

	// How the engine serves it (runlist.go).
	privileged bool        // commands name their context (the driver's own channels)
	ctx        *Context    // the context its commands run in (nil for a privileged one, or one attached in a client)
	ctxID      abi.Context // its id, which every command of an unprivileged channel carries
	prio       uint8       // abi.PriorityLow .. abi.MaxPriority
	slice      uint64      // cycles; 0: none
	state      uint64      // PA of its state block in device memory; 0: none
	ctxSave    uint64      // PA of its engine-context save area (ctxsave.go); 0: none
	hooks      *Hooks
	doorbells  *atomic.Uint64 // the driver's count of doorbell stores

	// A channel served to another process (ChannelOptions.Notify), or
	// attached in one (client.go): notify is called where waiters would
	// be signalled; closer takes an attached channel off its engine.
	notify  func()
	closer  func() error
	unshare func(abi.Channel)
	start   func(abi.Channel) error // ChannelOptions.Start until the channel is listed, then nil; guarded by runlists.engine[engine]
	// fenceWord, in a client, is the channel's RegFence: one blocked
	// waiter at a time sleeps on it (client.go, sleep), for at most
	// sleepFor; nil in the daemon's driver.
	fenceWord *atomic.Uint64
	sleepFor  time.Duration

	// Idle gating (idle.go): the engine's status page, where it says it
	// needs waking, and the call that wakes it.
	engineStatus uint64
	wakeEngine   func(abi.Channel)

	// Waiting (fence.go): how, and the blocked waiters.
	waitMode   WaitMode
	pollBudget uint64
	wake       Wake
	stats      *stats
	timeline   timeline
	estimate   copyEstimate // when a synchronous copy will complete (estimate.go)

	// The lock-free protocol's words; see nolock.go for who writes each.
	counters                           // reserved, publishing, rung
	freeFor  []atomic.Uint64           // freeFor[i&mask] == i: slot i&mask may take command i
	written  []atomic.Uint64           // written[i&mask] == i: command i is fully written
	owner    []atomic.Pointer[request] // owner[i&mask]: the request of the batch command last written there, or nil (an atomic here: see reapPassed)
}

// newChannel takes channel c, to be served by engine e, as the device
// presents it: the ring size from
// RegRingSize, the rings from the device, and the tail from RegDoorbell —
// the reset value on a fresh device, or where an earlier driver left it.
// It waits until the engine has completed everything below that tail, so
// that every completion it reads from now on is ours. A channel an earlier
// driver left faulted is refused: the device will not serve it again.
func (d *Driver) newChannel(c abi.Channel, e abi.Engine) (*Channel, error) {
	ch, err := d.env().channel(c, e)
	if ch != nil {
		ch.d = d
	}
	return ch, err
}

// channelEnv is what a channel takes from the driver that made it: the
// device's surface, the wait settings, and the counters and flags it
// shares with the driver's other channels. A Driver (driver.go) and a
// Client (client.go) each have one.
type channelEnv struct {
	hw         Hardware
	regs       *mmio.Registers
	yieldEvery int
	closed     *atomic.Bool
	hooks      *Hooks
	doorbells  *atomic.Uint64
	waitMode   WaitMode
	pollBudget uint64
	sizedWait  bool // the default budget: a copy's wait may poll longer (estimate.go)
	wake       Wake
	stats      *stats
	sleepFor   time.Duration // a client's sleep timeout
}

func (d *Driver) env() channelEnv {
	return channelEnv{hw: d.hw, regs: d.regs, yieldEvery: d.yieldEvery, closed: &d.closed, hooks: &d.hooks,
		doorbells: &d.doorbells, waitMode: d.waitMode, pollBudget: d.pollBudget, sizedWait: d.sizedWait, wake: d.wake, stats: &d.stats}
}

// channel makes the driver's side of channel c on engine e and picks up
// its ring where the device has it.
func (env channelEnv) channel(c abi.Channel, e abi.Engine) (*Channel, error) {
	size := env.regs.Load(abi.RegRingSize)
	if size == 0 || size&(size-1) != 0 {
		return nil, fmt.Errorf("%w: RegRingSize reads %d, not a power of two", ErrNoDevice, size)
	}
	// The rings are checked against the size before anything is made with
	// size entries, since the size is read from the device — and by
	// dividing their lengths, since size*abi.CommandSize wraps for a size
	// of 2^58 or more.
	slots, completions := env.hw.Ring(c), env.hw.Completions(c)
	if uint64(len(slots))/abi.CommandSize != size || uint64(len(completions))/abi.CompletionWords != size {
		return nil, fmt.Errorf("%w: %v's rings (%d and %d bytes) do not match RegRingSize %d",
			ErrNoDevice, c, len(slots), 8*len(completions), size)
	}
	ch := &Channel{
		id: c, engine: e, regs: env.regs,
		doorbell: abi.DoorbellPage(c), status: abi.ChannelStatusPage(c),
		slots: slots, completions: completions, size: size, mask: size - 1,
		yieldEvery: env.yieldEvery, closed: env.closed, hooks: env.hooks, doorbells: env.doorbells,
		engineStatus: abi.EngineStatusPage(e), wakeEngine: env.hw.Wake,
		waitMode: env.waitMode, pollBudget: env.pollBudget, wake: env.wake, stats: env.stats, sleepFor: env.sleepFor,
		owner: make([]atomic.Pointer[request], size), freeFor: make([]atomic.Uint64, size),
		written: make([]atomic.Uint64, size),
	}
	ch.timeline.ch = ch
	ch.estimate.enabled = env.sizedWait
	if err := ch.faultError(); err != nil {
		return nil, fmt.Errorf("%w (left so by an earlier driver)", err)
	}
	tail := ch.regs.Load(ch.doorbell + abi.RegDoorbell)
	if _, err := ch.awaitCompleted(tail - 1); err != nil {
		return nil, err
	}
	ch.reserved.Store(tail)
	ch.rung = tail
	for i := tail; i != tail+size; i++ {
		ch.freeFor[i&ch.mask].Store(i)        // every slot is free for the first lap
		ch.written[i&ch.mask].Store(i - size) // and holds nothing written in it
	}
	return ch, nil
}

// ID returns the channel's number.
func (ch *Channel) ID() abi.Channel { return ch.id }

// Engine returns the engine that serves the channel.
func (ch *Channel) Engine() abi.Engine { return ch.engine }

// mark returns the index the next command submitted on the channel will
// take: every command submitted so far lies below it.
// For a channel another process submits on, that is the doorbell: the
// engine may run every command below it and none above.
func (ch *Channel) mark() uint64 {
	if ch.notify != nil {
		return ch.regs.Load(ch.doorbell + abi.RegDoorbell)
	}
	return ch.reserved.Load()
}

// passed reports whether the engine has completed every command below
// mark. (The completion entries only grow, so this stays true.)
func (ch *Channel) passed(mark uint64) bool { return ch.completed(mark - 1) }

// stopped reports whether the device has stopped: every completion and
// fence it will ever write is written.
func (ch *Channel) stopped() bool { return ch.regs.Load(abi.RegDeviceState) == abi.DeviceStopped }

// endedErr returns why nothing more of the channel will run, or nil while
// it is served: the device stopped or the channel was closed (ErrClosed),
// or it faulted (its fault). Every wait checks it, and then settles on what
// did complete: after any of the three, the completions and the timeline
// are final.
func (ch *Channel) endedErr() error {
	if ch.stopped() || ch.removed.Load() {
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
