// Package driver is the host side of softgpu, what a kernel driver does:
// it submits commands and waits for them, allocates device memory, and moves
// data between host memory and the device. It reaches the device only
// through the Hardware interface (hardware.go).
//
// The driver has two halves. The device-wide half, Driver, owns what
// belongs to the whole device: device memory and its allocator, copies
// through the aperture, and stopping the device. The per-channel half,
// Channel (channel.go), submits commands on one channel and waits for
// them; it needs only the channel's registers and slot.
//
// Locking. There is one global lock, Driver.mu, held by a submitter
// from the moment it claims a channel until its command completes. So at
// most one command is in flight on the whole device, and the mailbox
// protocol never sees two writers. The allocator has its own lock (it never
// touches the device). Copies through the aperture hold aperture for
// reading, so that Close can wait them out before the device's memory goes
// away.
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

// Config configures a driver.
type Config struct {
	// YieldEvery is when the driver calls runtime.Gosched while it waits
	// for a completion (the same trade as device.Config.YieldEvery): zero
	// means after spin.YieldAfter of polling; positive, every that many
	// polls; negative, never.
	YieldEvery int
}

// Driver is the device-wide half of the driver.
type Driver struct {
	hw         Hardware
	regs       *mmio.Registers
	memSize    uint64
	yieldEvery int

	alloc  *Allocator
	closed atomic.Bool // set once by Close; checked by every entry point and every wait

	// aperture is held for reading by every CPU copy to or from device
	// memory, and for writing by Close, so that no copy is still touching
	// the memory once Close returns (the device may then unmap it).
	aperture sync.RWMutex

	// mu is the global driver lock: it serialises submissions, so one
	// command at a time is in flight on the whole device.
	mu       sync.Mutex
	channels [abi.NumChannels]*Channel

	hooks Hooks // test and benchmark hooks (hooks.go)
}

// New binds a driver to hw. The device may have run commands for an
// earlier driver: New picks each channel up where its doorbell left it, and
// waits for a command still in flight to finish, so that its completion is
// never mistaken for one of ours. It refuses a device that has stopped or
// whose channels an earlier driver left faulted.
func New(hw Hardware, cfg Config) (*Driver, error) {
	regs := hw.Registers()
	if id := regs.Load(abi.RegID); id != abi.DeviceID {
		return nil, fmt.Errorf("%w: RegID reads %#x", ErrNoDevice, id)
	}
	if regs.Load(abi.RegDeviceState) != abi.DeviceRunning {
		return nil, fmt.Errorf("%w: the device has stopped", ErrClosed)
	}
	memSize := regs.Load(abi.RegMemSize)
	if memSize != uint64(len(hw.Memory())) {
		return nil, fmt.Errorf("%w: RegMemSize reads %d, but the aperture has %d bytes", ErrNoDevice, memSize, len(hw.Memory()))
	}
	d := &Driver{
		hw:         hw,
		regs:       regs,
		memSize:    memSize,
		yieldEvery: cfg.YieldEvery,
		alloc:      NewAllocator(memSize),
	}
	for c := range abi.Channel(abi.NumChannels) {
		ch, err := d.newChannel(c)
		if err != nil {
			return nil, err
		}
		d.channels[c] = ch
	}
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

// Close stops the device and waits for its engines to stop. A call in
// progress returns its command's real status if the engine got to it (a
// DELAY cut short reports abi.StatusAborted), ErrClosed if it did not; later
// calls return ErrClosed. Close does not take the global lock: a submitter
// holds it while it waits, and the device stopping is what makes that wait
// end. When Close returns, the driver touches the device no more.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.regs.Store(abi.RegControl, abi.ControlStop)
	d.awaitStopped()
	d.aperture.Lock() // wait out the copies in progress; later ones see closed
	d.aperture.Unlock()
	return nil
}

// stopped reports whether the device has stopped: every engine is done,
// and every completion it will ever publish is published.
func (d *Driver) stopped() bool { return d.regs.Load(abi.RegDeviceState) == abi.DeviceStopped }

// awaitStopped waits until the device has stopped. The engines stop at the
// end of the command they are running, so this is one command long at most
// (a DELAY is cut short). It yields on the default cadence in time
// (internal/spin), whatever YieldEvery says: Close is no benchmark's
// subject, and a Close that never yielded could wait for the monitor's
// preemption to let an engine reach its stop.
func (d *Driver) awaitStopped() {
	yield := spin.NewCadence(0)
	for polls := 1; !d.stopped(); polls++ {
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
