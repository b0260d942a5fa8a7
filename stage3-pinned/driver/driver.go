// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device.
//
// It reaches the device only through device.Registers, the command rings and
// device memory (see package device for the ring picture, and ring.go here
// for the driver's side of it).
//
// Locking. Stage 1 keeps stage 0's one global lock, Driver.mu, but holds it
// only while it writes commands into a ring and moves the tail, and while it
// reaps completed commands — never while it waits for the device. Stage 2
// adds a lock per fence timeline (fence.go), never held with Driver.mu. So many
// commands are in flight at once, and each ring still has one writer. The
// allocator has its own lock (it never touches the device). Stage 3's pinned
// memory has its own lock too (pinned.go), and staged copies take turns on
// the bounce ring (bounce.go); neither is ever held with Driver.mu.
package driver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage3-pinned/abi"
	"softgpu/stage3-pinned/device"
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

	// mu is the global driver lock: it guards each ring's tail and the
	// driver's bookkeeping of it (see ring.go). It is not held while
	// waiting for the device.
	mu    sync.Mutex
	rings [abi.NumEngines]ring

	// pinMu guards the driver's bookkeeping of pinned memory and the DMA
	// window (pinned.go). It is never held while waiting for the device.
	pinMu      sync.Mutex
	slotsInUse uint64     // bit i: window entry i is taken
	regions    []*Pinned  // live regions
	busSpace   *Allocator // bus ranges, as offsets from abi.BusBase

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
// return ErrClosed. Close does not take the global lock: it must end waits,
// not queue behind a submitter that holds it. Close unpins the bounce
// buffers; regions from HostAlloc stay mapped until HostFree.
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
