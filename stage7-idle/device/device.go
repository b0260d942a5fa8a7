// Package device is the hardware of softgpu: device memory (a byte arena),
// a 1 GHz clock, a register space, and two engines — compute and copy — each
// a goroutine that executes 64-byte commands.
//
// In stage 1 each engine has a command ring: a power-of-two array of
// command slots and a status array beside it, in host-visible memory, and
// two registers holding free-running indices into it (see ring.go):
//
//	driver                                    engine (pollLoop, spinning)
//	------                                    ---------------------------
//	encode n commands into the slots
//	  of indices tail, ..., tail+n-1  ──┐
//	store tail+n → RegDoorbell ─────────┼───► fetch: nothing left below the
//	                                    │       tail it saw? load RegDoorbell
//	                                    └───► execute: slot head&mask
//	load RegHead; past my index? ◄──────────  complete: store status → status[head&mask],
//	read status[index&mask]      ◄──────────            then store head+1 → RegHead
//
// The driver reaches the device only through Registers, Ring, RingStatus and
// Memory — what a real driver has through its BARs — and, since stage 7,
// Wake, the call that wakes a sleeping engine (idle.go). Nothing outside this
// package touches an engine's internals.
//
// Invariants:
//   - each shared cache line has one writer: the ring slots and RegDoorbell
//     are written only by the driver, the status array and RegHead only by
//     the engine;
//   - an engine never writes outside the byte range its current command
//     names, and never panics on a bad command: it reports a Status;
//   - after Close returns, no engine goroutine is running.
package device

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
)

// Config sizes the device.
type Config struct {
	// MemorySize is the size of device memory in bytes. Default 64 MiB.
	MemorySize uint64
	// YieldEvery is how many empty polls an engine makes between calls to
	// runtime.Gosched. Zero means the default, 64; a negative value means
	// never yield. See pollLoop for why yielding matters on two cores.
	YieldEvery int
	// RingSize is the number of command slots in each engine's ring. Zero
	// means DefaultRingSize; otherwise a power of two up to MaxRingSize.
	RingSize uint64
	// RingStart is the ring index both sides start from: the engines' first
	// head and the value RegDoorbell holds at reset. Zero is normal; tests
	// start just below 2^64 to run the indices across the wrap.
	RingStart uint64
}

// DefaultMemorySize is the device memory of a zero Config.
const DefaultMemorySize = 64 << 20

// DefaultYieldEvery is the yield interval of a zero Config.
const DefaultYieldEvery = 64

// maxMemorySize keeps device addresses far from overflow and the arena
// allocatable on a small machine.
const maxMemorySize = 16 << 30

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("device: bad config")

// Device is one softgpu: memory, clock, registers and the engines.
type Device struct {
	cfg   Config
	clock *Clock
	regs  *Registers
	mem   []byte // device memory; host-visible in full (the "aperture")

	// rings[e] is engine e's command ring: host-visible memory the driver
	// writes and the engine reads after the doorbell. statuses[e] is the
	// status array beside it, written by the engine before it moves RegHead.
	rings    [abi.NumEngines][]byte
	statuses [abi.NumEngines][]byte

	engines [abi.NumEngines]*Engine

	// irq is the interrupt line: the handler the driver connected with
	// SetInterruptHandler, or nil. See fence.go.
	irq atomic.Pointer[func(abi.Engine)]

	stopping atomic.Bool    // set by Close; engines return when they see it
	running  sync.WaitGroup // one count per engine goroutine
	stopOnce sync.Once
}

// Open creates a device and starts its engines.
func Open(cfg Config) (*Device, error) {
	if cfg.MemorySize == 0 {
		cfg.MemorySize = DefaultMemorySize
	}
	if cfg.MemorySize > maxMemorySize {
		return nil, fmt.Errorf("%w: MemorySize %d exceeds the %d-byte limit", ErrConfig, cfg.MemorySize, maxMemorySize)
	}
	if cfg.YieldEvery == 0 {
		cfg.YieldEvery = DefaultYieldEvery
	}
	if err := checkRingConfig(&cfg); err != nil {
		return nil, err
	}
	d := &Device{
		cfg:   cfg,
		clock: newClock(),
		regs:  newRegisters(abi.RegSpaceSize),
		mem:   alignedBytes(int(cfg.MemorySize)),
	}
	d.regs.Store(abi.RegID, abi.DeviceID)
	d.regs.Store(abi.RegMemSize, cfg.MemorySize)
	d.regs.Store(abi.RegRingSize, cfg.RingSize)
	for e := range abi.Engine(abi.NumEngines) {
		d.resetRing(e)
		d.resetFence(e)
		d.resetIdle(e)
		d.engines[e] = newEngine(d, e)
	}
	for _, eng := range d.engines {
		d.running.Add(1)
		go eng.pollLoop()
	}
	return d, nil
}

// Registers returns the register space.
func (d *Device) Registers() *Registers { return d.regs }

// Ring returns engine e's command ring: RingSize slots of abi.CommandSize
// bytes, the first on a cache-line boundary.
func (d *Device) Ring(e abi.Engine) []byte { return d.rings[e] }

// RingStatus returns the status array of engine e's ring: RingSize entries
// of abi.StatusEntrySize bytes, written by the engine.
func (d *Device) RingStatus(e abi.Engine) []byte { return d.statuses[e] }

// Memory returns device memory. All of it is host-visible in this model, as
// if the whole of it sat behind a large BAR: the driver copies ordinary Go
// slices in and out with the CPU.
func (d *Device) Memory() []byte { return d.mem }

// Clock returns the device clock.
func (d *Device) Clock() *Clock { return d.clock }

// Close stops the engines and waits for their goroutines to return. A command
// that is running finishes (a DELAY is cut short and reports StatusAborted);
// the commands behind it in the ring are never started, and a doorbell rung
// after that is never answered, which the driver detects by its own closed
// flag. Close is idempotent.
func (d *Device) Close() {
	d.stopOnce.Do(func() {
		d.stopping.Store(true) // every engine loop loads it; see pollLoop and delay
		d.wakeAll()            // and a sleeping engine must wake to see it (idle.go)
		d.running.Wait()
	})
}
