// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device. It reaches the device only
// through the Hardware interface (hardware.go).
//
// The driver has two halves. The device-wide half, Driver, owns what
// belongs to the whole device: device memory and its allocator, copies by
// DMA, pinned memory and the DMA window, interrupt handling, and stopping
// the device. The per-channel half, Channel (channel.go), submits commands
// on one channel and waits for them; it needs only the channel's registers
// and rings.
//
// Locking. There is no lock on the path from submission to completion:
// submitting, waiting and reaping are atomic operations on words with one
// stated writer each (nolock.go has the protocol). The locks that remain
// are all off that path, and none is held with another: the allocator's
// (host bookkeeping, never touched by a submission); each fence timeline's
// (fence.go), taken only by a waiter about to sleep and by the interrupt
// handler that wakes it; pinMu (pinned.go), taken by HostAlloc and
// HostFree — a copy finds its pinned region in a snapshot, without it; and
// the bounce ring's (bounce.go), which staged copies take turns on, for the
// buffers, not the ring of commands.
package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/internal/spin"
	"softgpu/stage7-idle/mmio"
	"softgpu/stage7-idle/trace"
)

// Config configures a driver.
type Config struct {
	// YieldEvery is when the driver calls runtime.Gosched while it waits
	// for a completion (the same trade as device.Config.YieldEvery): zero
	// means after spin.YieldAfter of polling; positive, every that many
	// polls; negative, never.
	YieldEvery int

	// How waits wait and how interrupts reach waiters (fence.go, irq.go).
	Wait       WaitMode // default WaitHybrid
	PollBudget uint64   // cycles a hybrid wait polls before it blocks; zero means DefaultPollBudget, sized for a copy (estimate.go)
	Delivery   Delivery // default IRQDirect
	Wake       Wake     // default WakeTargeted

	// The ring of pinned bounce buffers that copies of ordinary slices go
	// through (bounce.go). Zero means DefaultBounceChunk bytes per buffer,
	// DefaultBounceBuffers buffers.
	BounceChunk   uint64
	BounceBuffers int

	// What the engines do when their rings are empty (idle.go); the zero
	// value is hybrid with a 50 µs budget.
	Idle Idle

	sizedWait bool // set by check: PollBudget was left to the default, which the estimate may lengthen
}

// check fills in defaults and refuses values that name nothing, each with
// ErrConfig and the field's name: an unknown delivery path would leave
// every blocked wait without a wake-up.
func (cfg *Config) check() error {
	if cfg.PollBudget == 0 {
		cfg.PollBudget = DefaultPollBudget
		cfg.sizedWait = true
	}
	switch {
	case !cfg.Wait.Defined():
		return fmt.Errorf("%w: Wait %d is not a wait mode", ErrConfig, cfg.Wait)
	case !cfg.Delivery.Defined():
		return fmt.Errorf("%w: Delivery %d is not a delivery path", ErrConfig, cfg.Delivery)
	case !cfg.Wake.Defined():
		return fmt.Errorf("%w: Wake %d is not a wake policy", ErrConfig, cfg.Wake)
	}
	if err := cfg.Idle.check(); err != nil {
		return err
	}
	return checkBounce(cfg)
}

// Driver is the device-wide half of the driver.
type Driver struct {
	hw         Hardware
	regs       *mmio.Registers
	trace      *trace.Buffer // nil when tracing is off
	memSize    uint64
	yieldEvery int

	// Waiting and interrupts (fence.go, irq.go).
	waitMode   WaitMode
	pollBudget uint64
	sizedWait  bool // the default budget: a copy's wait may poll longer (estimate.go)
	delivery   Delivery
	wake       Wake
	irq        irq
	stats      stats

	alloc  *Allocator
	closed atomic.Bool // set once by Close; checked by every entry point and every wait

	// pinMu guards the driver's bookkeeping of pinned memory and the DMA
	// window (pinned.go). It is never held while waiting for the device.
	pinMu      sync.Mutex
	slotsInUse uint64     // bit i: window entry i is taken, or retiring
	regions    []*Pinned  // live regions
	busSpace   *Allocator // bus ranges in use or retiring, as offsets from abi.BusBase
	retiring   []retired  // freed entries waiting for the commands queued before their free
	// retiringAdds counts the entries HostFree has put on retiring: it
	// adds one after each append, holding pinMu; register's wait loads it
	// without pinMu, to see an entry that joined after its copy.
	retiringAdds atomic.Uint64
	// pinnedSpans is an immutable copy of the live regions' spans, for
	// pinnedBus to read without pinMu; replaced, under pinMu, whenever
	// regions changes (nolock.go).
	pinnedSpans atomic.Pointer[[]pinnedSpan]

	bounce bounceRing // staging for copies of ordinary slices (bounce.go)

	channels  [abi.NumChannels]*Channel
	doorbells atomic.Uint64 // doorbell stores so far, for the benchmarks' doorbells/op

	hooks Hooks // test and benchmark hooks (hooks.go)
}

// New binds a driver to hw. The device may have run commands for an
// earlier driver: New picks each channel up where its doorbell left it, and
// waits for a command still in flight to finish, so that its completion is
// never mistaken for one of ours. It refuses a device that has stopped or
// whose channels an earlier driver left faulted. It disables every DMA
// window entry (an earlier driver's regions are not ours to use) and pins
// the bounce buffers: a failure to pin them is ErrPinLimit.
func New(hw Hardware, cfg Config) (*Driver, error) {
	regs := hw.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if regs.Load(abi.RegDeviceState) != abi.DeviceRunning {
		return nil, fmt.Errorf("%w: the device has stopped", ErrClosed)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	memSize := regs.Load(abi.RegMemSize)
	if memSize != uint64(len(hw.Memory())) {
		return nil, fmt.Errorf("%w: RegMemSize reads %d, but the aperture has %d bytes", ErrNoDevice, memSize, len(hw.Memory()))
	}
	d := &Driver{
		hw:         hw,
		regs:       regs,
		trace:      hw.Trace(),
		memSize:    memSize,
		yieldEvery: cfg.YieldEvery,
		waitMode:   cfg.Wait,
		pollBudget: cfg.PollBudget,
		sizedWait:  cfg.sizedWait,
		delivery:   cfg.Delivery,
		wake:       cfg.Wake,
		alloc:      NewAllocator(memSize),
		busSpace:   NewAllocator(abi.BusSize),
	}
	for c := range abi.Channel(abi.NumChannels) {
		ch, err := d.newChannel(c)
		if err != nil {
			return nil, err
		}
		d.channels[c] = ch
	}
	for e := range abi.Engine(abi.NumEngines) {
		if err := d.SetIdle(e, cfg.Idle); err != nil {
			return nil, err
		}
	}
	d.resetWindow()
	if err := d.initBounce(cfg); err != nil {
		return nil, err
	}
	d.startIRQ()
	return d, nil
}

// Channel returns the driver's half of channel c.
func (d *Driver) Channel(c abi.Channel) (*Channel, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrNoChannel, c)
	}
	return d.channels[c], nil
}

// Submit runs cmd on engine e's channel and waits for it; see
// Channel.Submit.
func (d *Driver) Submit(e abi.Engine, cmd abi.Command) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	return d.channels[abi.DefaultChannel(e)].Submit(cmd)
}

// SubmitBatch places cmds on engine e's channel; see Channel.SubmitBatch.
func (d *Driver) SubmitBatch(e abi.Engine, cmds []abi.Command) (*Pending, error) {
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	return d.channels[abi.DefaultChannel(e)].SubmitBatch(cmds)
}

// Doorbells returns how many times the driver has rung a doorbell (on any
// channel) since it was created.
func (d *Driver) Doorbells() uint64 { return d.doorbells.Load() }

// Close stops the device and waits for its engines to stop. A call in
// progress — a Submit, a Wait, a submitter waiting for room in a full ring
// — returns each command's real status if the engine got to it (a DELAY
// cut short reports abi.StatusAborted), ErrClosed if it did not; later
// calls return ErrClosed. Close unpins the bounce buffers; regions from
// HostAlloc stay mapped until HostFree. When Close returns, the driver
// touches the device no more.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.regs.Store(abi.RegControl, abi.ControlStop)
	for c := range abi.Channel(abi.NumChannels) {
		d.hw.Wake(c) // a sleeping engine must wake to see the stop
	}
	d.awaitStopped()
	// The device raised IrqCauseStopped as it stopped, and the interrupt
	// thread wakes every blocked waiter when it takes it; this makes sure
	// of it before the thread goes away.
	for _, ch := range d.channels {
		ch.timeline.wakeAll()
	}
	d.awaitIRQ()
	d.closeBounce()
	return nil
}

// stopped reports whether the device has stopped: every engine is done,
// and every completion it will ever publish is published.
func (d *Driver) stopped() bool { return d.regs.Load(abi.RegDeviceState) == abi.DeviceStopped }

// awaitStopped waits until the device has stopped. The engines stop at the
// end of the command they are running, so this is one command long at most
// (a DELAY is cut short).
func (d *Driver) awaitStopped() { spinUntil(d.stopped) }

// spinUntil polls cond until it reports true, yielding on the default
// cadence in time (internal/spin): for waits that last a command at most.
func spinUntil(cond func() bool) {
	yield := spin.NewCadence(0)
	for polls := 1; !cond(); polls++ {
		if yield.Due(polls) {
			runtime.Gosched()
		}
	}
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

// MemorySize reports the bytes of device memory.
func (d *Driver) MemorySize() uint64 { return d.memSize }

// Now reads the device clock: cycles (nanoseconds) since the device was
// opened.
func (d *Driver) Now() uint64 { return d.regs.Load(abi.RegTimestamp) }

// Closed reports whether Close has been called.
func (d *Driver) Closed() bool { return d.closed.Load() }
