// Package device is the hardware of softgpu: device memory (a byte arena),
// a 1 GHz clock, a register space, and two engines — compute and copy — each
// a goroutine that executes 64-byte commands.
//
// Each engine serves one channel, and a channel is a pair of rings in
// host-visible memory and a doorbell register (ring.go): the driver writes
// commands into the submission ring and stores the new tail to RegDoorbell;
// the engine runs every command below the tail, in order, and writes each
// one's status, then its index, into the completion ring:
//
//	driver                                   engine (pollLoop, spinning)
//	------                                   ---------------------------
//	encode commands into slots i..t-1 ──┐
//	store t → RegDoorbell ──────────────┼──► fetch: load RegDoorbell (only when
//	                                    │    head has caught up); at most a ring ahead?
//	                                    └──► copy slot i out; execute it
//	load entry i's index == i? ◄──────────── complete: store status → entry i
//	load entry i's status      ◄──────────── complete: store i → entry i's index
//
// Around the rings:
//   - fence.go: a command with FlagFence writes the channel's fence
//     timeline after its completion entry, and with FlagInterrupt may then
//     raise the device's one interrupt line, as the driver's arm registers
//     say; a channel's fault and the device's stop raise it too.
//   - dma.go: a command reaches host memory only through the DMA window:
//     bus ranges the driver maps onto host regions it has registered.
//
// What the driver may use of a device is written down as an interface in
// package driver (driver.Hardware): the register space, device memory, the
// rings, the interrupt line, the registration of host memory for DMA and the
// trace. Nothing outside this package touches an engine's internals, and the
// engines trust nothing the driver writes: a bad command is a Status, a
// doorbell out of protocol faults its channel (and only it), and no value
// read from a register ever becomes a pointer.
//
// Invariants:
//   - each shared cache line has one writer (abi.Table says which);
//   - an engine never writes outside the byte range its current command
//     names, and never panics on anything in a slot or a register: it
//     reports a Status, or faults the channel;
//   - RegDeviceState reads DeviceStopped only after every engine has
//     stopped; after Close returns, no engine goroutine is running and
//     device memory is unmapped.
package device

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage4-nolock/abi"
	"softgpu/stage4-nolock/mmio"
	"softgpu/stage4-nolock/trace"
)

// Config sizes the device.
type Config struct {
	// MemorySize is the size of device memory in bytes. Default 64 MiB.
	MemorySize uint64
	// YieldEvery is when an engine that polls in vain calls
	// runtime.Gosched. Zero, the default, means after spin.YieldAfter of
	// spinning; a positive value means every that many empty polls,
	// counted; a negative one, never. See pause in engine.go for why
	// yielding matters on two cores.
	YieldEvery int
	// RingSize is the number of entries in each channel's rings. Zero
	// means DefaultRingSize; otherwise a power of two up to MaxRingSize.
	RingSize uint64
	// Start is the ring index both sides start from: the engines' first
	// head and the value RegDoorbell holds at reset. Zero is normal; tests
	// start just below 2^64 to run the indices across the wrap.
	Start uint64
	// Trace, if not nil, receives the device's events (package trace).
	Trace *trace.Buffer
	// Stepped opens the device with no engine goroutines: an engine runs
	// a command only when Step is called, on the caller's goroutine. It is
	// a measuring instrument, not a mode a driver runs in (stepped.go).
	Stepped bool
}

// DefaultMemorySize is the device memory of a zero Config.
const DefaultMemorySize = 64 << 20

// MaxMemorySize keeps device addresses far from overflow.
const MaxMemorySize = 16 << 30

// ErrConfig reports an unusable Config.
var ErrConfig = errors.New("softgpu: bad config")

// ErrNoMemory reports that the host could not reserve the device memory.
var ErrNoMemory = errors.New("softgpu: cannot reserve device memory")

// Device is one softgpu: memory, clock, registers and the engines.
type Device struct {
	cfg   Config
	clock *Clock
	regs  *mmio.Registers
	mem   []byte // device memory, mapped by Open, unmapped by Close; host-visible in full (the "aperture")
	trace *trace.Buffer

	// rings[c] is channel c's submission ring: host-visible memory the
	// driver writes and the engine reads after the doorbell.
	// completions[c] is its completion ring, written by the engine.
	rings       [abi.NumChannels][]byte
	completions [abi.NumChannels][]atomic.Uint64

	// chans[c] is channel c's state, which only the engine serving it
	// touches (ring.go).
	chans [abi.NumChannels]chanState

	engines [abi.NumEngines]*Engine

	hostTable // host memory registered for DMA (dma.go)

	// irq is the interrupt line of the connected driver, or nil: a token
	// means "raised since the driver last looked" (fence.go). irqMu
	// guards it, so that a raise never sends on a line being closed.
	irqMu sync.Mutex
	irq   chan struct{}

	running   sync.WaitGroup // one count per engine goroutine
	live      atomic.Int32   // engines not yet stopped; the last to stop publishes DeviceStopped
	closeOnce sync.Once
	stepStop  sync.Once // a stepped device's engines stop once (stepped.go)
}

// Open creates a device and starts its engines.
func Open(cfg Config) (*Device, error) {
	if cfg.MemorySize == 0 {
		cfg.MemorySize = DefaultMemorySize
	}
	if cfg.MemorySize > MaxMemorySize {
		return nil, fmt.Errorf("%w: MemorySize %d exceeds the %d-byte limit", ErrConfig, cfg.MemorySize, uint64(MaxMemorySize))
	}
	if err := checkRingConfig(&cfg); err != nil {
		return nil, err
	}
	mem, err := mapMemory(cfg.MemorySize)
	if err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, clock: newClock(), mem: mem, trace: cfg.Trace}
	d.regs = mmio.NewRegisters(alignedWords(abi.RegSpaceSize/8), d.clock.Now)
	d.regs.Store(abi.RegID, abi.DeviceID)
	d.regs.Store(abi.RegMemSize, cfg.MemorySize)
	d.regs.Store(abi.RegRingSize, cfg.RingSize)
	for c := range abi.Channel(abi.NumChannels) {
		d.resetRing(c)
		d.resetFence(c)
	}
	for e := range abi.Engine(abi.NumEngines) {
		d.engines[e] = newEngine(d, e)
	}
	d.live.Store(abi.NumEngines)
	if cfg.Stepped {
		return d, nil // no engine goroutines: Step runs the engines (stepped.go)
	}
	for _, eng := range d.engines {
		d.running.Add(1)
		go eng.pollLoop()
	}
	return d, nil
}

// Registers returns the register space.
func (d *Device) Registers() *mmio.Registers { return d.regs }

// Ring returns channel c's submission ring — RingSize slots of
// abi.CommandSize bytes, the first on a cache-line boundary — or nil if c
// is not a channel of the device.
func (d *Device) Ring(c abi.Channel) []byte {
	if !c.Valid() {
		return nil
	}
	return d.rings[c]
}

// Completions returns channel c's completion ring as 64-bit words
// (abi.CompletionWords per entry), written by the engine, or nil if c is
// not a channel of the device.
func (d *Device) Completions(c abi.Channel) []atomic.Uint64 {
	if !c.Valid() {
		return nil
	}
	return d.completions[c]
}

// Memory returns device memory. All of it is host-visible in this model, as
// if the whole of it sat behind a large BAR: the driver copies ordinary Go
// slices in and out with the CPU. It must not be touched after Close.
func (d *Device) Memory() []byte { return d.mem }

// Trace returns the buffer the device records its events in, or nil when
// tracing is off.
func (d *Device) Trace() *trace.Buffer { return d.trace }

// Close powers the device off: it stops the engines as ControlStop does,
// waits for their goroutines to return, and unmaps device memory. The
// caller must be done with Memory (the driver is, once its Close has
// returned). Close is idempotent.
func (d *Device) Close() {
	d.closeOnce.Do(func() {
		d.stop()
		unmapMemory(d.mem)
		d.mem = nil
	})
}

// stop stops the engines as ControlStop does and waits for their
// goroutines to return.
func (d *Device) stop() {
	d.regs.Store(abi.RegControl, abi.ControlStop) // every engine loop loads it; see stopRequested
	d.running.Wait()
	d.StopStepped() // a stepped device has no loops to stop (stepped.go)
}
