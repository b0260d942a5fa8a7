// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device.
//
// It reaches the device only through device.Registers, the command rings and
// device memory (see package device for the ring picture, and ring.go here
// for the driver's side of it).
//
// Locking. Stage 4 has no lock on the path from submission to completion:
// SubmitBatch, Wait and reaping are atomic operations on words with one
// stated writer each (nolock.go has the protocol). The locks that remain
// are all off that path, and none is held with another: the allocator's
// (host bookkeeping, never touched by a submission); each fence timeline's
// (fence.go), taken only by a waiter about to sleep and by the interrupt
// handler that wakes it; pinMu (pinned.go), taken by HostAlloc and HostFree
// — a copy finds its pinned region in a snapshot, without it; and the
// bounce ring's (bounce.go), which staged copies take turns on, for the
// buffers, not the ring of commands.
package driver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/device"
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

	// Stage 2: how fences are waited for and how interrupts reach waiters.
	Wait       WaitMode // default WaitHybrid
	PollBudget uint64   // cycles a hybrid wait polls before it blocks; zero means DefaultPollBudget
	Delivery   Delivery // default IRQDirect
	Wake       Wake     // default WakeTargeted

	// Stage 3: the ring of pinned bounce buffers that copies of ordinary
	// slices go through (bounce.go). Zero means DefaultBounceChunk bytes
	// per buffer, DefaultBounceBuffers buffers.
	BounceChunk   uint64
	BounceBuffers int

	// Stage 7: what the engines do when their rings are empty.
	Idle       IdleMode // default IdleHybrid
	IdleBudget uint64   // cycles a hybrid engine spins before it sleeps; zero means abi.DefaultIdleBudget
}

// Driver drives one device.
type Driver struct {
	dev        *device.Device
	regs       *device.Registers
	memSize    uint64
	yieldEvery int

	alloc  *Allocator
	closed atomic.Bool // set once by Close; checked by every entry point and every wait

	doorbells atomic.Uint64 // doorbell stores so far, for the benchmarks' doorbells/op

	// Fences and interrupts (fence.go, irq.go).
	waitMode   WaitMode
	pollBudget uint64
	delivery   Delivery
	wake       Wake
	timelines  [abi.NumEngines]timeline
	closing    chan struct{} // closed by Close: wakes every blocked waiter
	irqKick    chan struct{} // hardIRQ → the IRQ thread (threaded, workqueue)
	irqWork    chan struct{} // the IRQ thread → the worker (workqueue)
	irqStop    chan struct{} // closed by Close: stops the delivery goroutines
	irqThreads sync.WaitGroup

	irqs, wakeups, futileWakeups atomic.Uint64 // see Stats
	engineWakes                  atomic.Uint64 // doorbells that had to wake their engine (idle.go)

	rings [abi.NumEngines]ring // each ring's words say who writes them (nolock.go)

	// testHookReserved, if set (by tests only, before any submission), is
	// called by SubmitBatch between reserving its indices and writing them.
	testHookReserved func(e abi.Engine, first, n uint64)
	// testHookPublishing, likewise, is called by publish just before it
	// lets go of publishing.
	testHookPublishing func()

	// pinMu guards the driver's bookkeeping of pinned memory and the DMA
	// window (pinned.go). It is never held while waiting for the device.
	pinMu      sync.Mutex
	slotsInUse uint64     // bit i: window entry i is taken
	regions    []*Pinned  // live regions
	busSpace   *Allocator // bus ranges, as offsets from abi.BusBase
	// pinnedSpans is an immutable copy of the live regions' spans, for
	// pinnedBus to read without pinMu; replaced, under pinMu, whenever
	// regions changes (stage 4, nolock.go).
	pinnedSpans atomic.Pointer[[]pinnedSpan]

	bounce bounceRing // staging for copies of ordinary slices (bounce.go)
}

// New binds a driver to dev. The device may have run commands for an earlier
// driver: New picks up each ring where its doorbell left it, and waits for
// the commands still in flight to finish, so that their completions are
// never mistaken for ours. It disables every DMA window entry (an earlier
// driver's regions are not ours to use) and pins the bounce buffers: a
// failure to pin them is ErrPinLimit.
func New(dev *device.Device, cfg Config) (*Driver, error) {
	regs := dev.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if cfg.YieldEvery == 0 {
		cfg.YieldEvery = device.DefaultYieldEvery
	}
	memSize := regs.Load(abi.RegMemSize)
	if cfg.PollBudget == 0 {
		cfg.PollBudget = DefaultPollBudget
	}
	d := &Driver{
		dev:        dev,
		regs:       regs,
		memSize:    memSize,
		yieldEvery: cfg.YieldEvery,
		alloc:      NewAllocator(memSize),
		busSpace:   NewAllocator(abi.BusSize),
		waitMode:   cfg.Wait,
		pollBudget: cfg.PollBudget,
		delivery:   cfg.Delivery,
		wake:       cfg.Wake,
	}
	for e := range abi.Engine(abi.NumEngines) {
		if err := d.initRing(e); err != nil {
			return nil, err
		}
		if err := d.SetIdle(e, cfg.Idle, cfg.IdleBudget); err != nil {
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

// ANCHOR: submit
// Submit runs cmd on engine e and waits for it. It fills in cmd.Seq. A
// command the device refuses comes back as a *CommandError.
func (d *Driver) Submit(e abi.Engine, cmd abi.Command) error {
	p, err := d.SubmitBatch(e, []abi.Command{cmd})
	if err != nil {
		return err
	}
	return p.Wait()
}

// ANCHOR_END: submit

// Close stops the device and waits for its engines to stop. A call in
// progress — a Submit, a Wait, a submitter waiting for room in a full ring —
// returns each command's real status if the engine got to it (a DELAY cut
// short reports abi.StatusAborted), ErrClosed if it did not; later calls
// return ErrClosed. Close unpins the bounce buffers; regions from HostAlloc
// stay mapped until HostFree.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	close(d.closing) // blocked waiters wake, close the device themselves, and settle
	d.dev.Close()
	d.stopIRQ()
	d.closeBounce()
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
