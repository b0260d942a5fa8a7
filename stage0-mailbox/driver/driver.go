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
	return fmt.Sprintf("softgpu: %v on the %v engine (seq %d): %v", e.Op, e.Engine, e.Seq, e.Status)
}

func (e *CommandError) Unwrap() error { return e.Status }

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

// New binds a driver to dev. yieldEvery is the number of polls between
// runtime.Gosched calls while the driver waits for a completion (the same
// trade as device.Config.YieldEvery); zero means 64, negative never.
func New(dev *device.Device, yieldEvery int) (*Driver, error) {
	regs := dev.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if yieldEvery == 0 {
		yieldEvery = device.DefaultYieldEvery
	}
	memSize := regs.Load(abi.RegMemSize)
	return &Driver{
		dev:        dev,
		regs:       regs,
		memSize:    memSize,
		yieldEvery: yieldEvery,
		alloc:      NewAllocator(memSize),
	}, nil
}

// ANCHOR: submit
// Submit runs cmd on engine e and waits for it. It fills in cmd.Seq. A
// command the device refuses comes back as a *CommandError.
func (d *Driver) Submit(e abi.Engine, cmd abi.Command) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("softgpu: no engine %d", e)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	d.lastSeq[e]++
	cmd.Seq = d.lastSeq[e]
	bank := abi.EngineRegs(e)

	// Plain stores into the slot. The engine does not read it until it
	// sees the doorbell change, and the global lock keeps any other
	// submitter out until this command has completed.
	cmd.Encode(d.dev.CommandSlot(e))
	// This store publishes the slot; the engine's load of RegDoorbell in
	// pollLoop pairs with it.
	d.regs.Store(bank+abi.RegDoorbell, cmd.Seq)

	if err := d.waitLocked(bank, cmd.Seq); err != nil {
		return err
	}
	if st := abi.Status(d.regs.Load(bank + abi.RegCompletedStatus)); st != abi.StatusOK {
		return &CommandError{Engine: e, Op: cmd.Op, Seq: cmd.Seq, Status: st}
	}
	return nil
}

// waitLocked spins until the engine publishes seq as completed. The load of
// RegCompletedSeq pairs with the engine's store of it, so once seq is seen
// the status the engine stored before it can be read. Sequences compare
// wrap-safely: int64(completed-seq) >= 0 means "completed has reached seq".
func (d *Driver) waitLocked(bank, seq uint64) error {
	checkEvery := d.yieldEvery
	if checkEvery < 0 { // never yield, but still notice Close
		checkEvery = 1024
	}
	for polls := 1; ; polls++ {
		if completed := d.regs.Load(bank + abi.RegCompletedSeq); int64(completed-seq) >= 0 {
			return nil
		}
		if polls%checkEvery == 0 {
			if d.closed.Load() {
				// The engines may already be gone: nobody will answer.
				return ErrClosed
			}
			if d.yieldEvery > 0 {
				runtime.Gosched()
			}
		}
	}
}

// ANCHOR_END: submit

// Close stops the device. Calls in progress return ErrClosed (or, for a
// DELAY cut short, a CommandError with abi.StatusAborted); later calls return
// ErrClosed. Close does not take the global lock: a submitter holds it while
// it waits, and Close is what makes that wait end.
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
