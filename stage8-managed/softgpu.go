// Package softgpu is the user-facing API of the device: what a CUDA-like
// runtime library gives an application. Open a device, allocate device
// memory, copy data in and out, fill, copy and run kernels on the engines,
// close.
//
// Every call in this file is synchronous: it returns when the device has
// finished. Underneath, package driver reserves a slot in the channel's
// ring with atomics, writes the command, publishes it in order and rings
// the doorbell with the new tail, taking no lock (driver/nolock.go); then
// it waits for the command's completion entry — polling it, or sleeping on
// the channel's fence until the interrupt (fence.go). hostmem.go adds
// pinned host memory, which the copy engine reads and writes directly.
// idle.go lets an engine with nothing to do sleep.
// context.go adds address spaces of their own, each with its page tables.
// channel.go adds channels of one's own, scheduled by priority and timeslice.
// managed.go adds memory the host and the device address alike, by migration.
// batch.go adds the asynchronous calls that keep many commands in flight,
// and batches that share one doorbell (see the stage README).
package softgpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
	"softgpu/stage8-managed/driver"
	"softgpu/stage8-managed/trace"
)

// Config configures a device. The zero value is a sensible default.
type Config struct {
	// MemorySize is device memory in bytes (default 64 MiB, at most 16 GiB).
	MemorySize uint64
	// YieldEvery is when a spinning loop — an engine's, or the host's
	// while it waits — calls runtime.Gosched: by default after it has
	// spun for 250 ns (internal/spin.YieldAfter); a positive value, every
	// that many empty polls, counted; negative, never.
	YieldEvery int
	// RingSize is the number of command slots in each channel's ring
	// (default 256; a power of two up to 65536).
	RingSize uint64

	// Wait is how waits wait: hybrid (default; poll for PollBudget cycles,
	// then block), poll, or block.
	Wait driver.WaitMode
	// PollBudget is the hybrid wait's polling budget in cycles (default
	// 50,000: 50 µs).
	PollBudget uint64
	// Delivery is the interrupt path to a blocked waiter: direct (default),
	// threaded or workqueue.
	Delivery driver.Delivery
	// Wake is targeted (default: interrupt only when a waiter's fence is
	// reached) or every (interrupt on every fenced completion).
	Wake driver.Wake

	// BounceChunk and BounceBuffers size the ring of pinned bounce
	// buffers that Write and Read stage ordinary slices through (default
	// 4 buffers of 256 KiB).
	BounceChunk   uint64
	BounceBuffers int

	// Idle is what an engine does when its ring is empty: hybrid
	// (default; spin for IdleBudget cycles, then sleep), spin, sleep, or
	// adaptive (spin for a budget learnt from the gaps, between
	// IdleBudgetMin and IdleBudgetMax).
	Idle IdleMode
	// IdleBudget is the hybrid spin in cycles (default 50,000: 50 µs).
	IdleBudget uint64
	// IdleBudgetMin and IdleBudgetMax bound the adaptive budget in cycles
	// (default 0 and 200,000).
	IdleBudgetMin, IdleBudgetMax uint64

	// Watchdog is the longest a command may run on an engine before the
	// engine stops it with StatusTimeout and faults its channel and its
	// context (channel.go); zero (the default) means no limit.
	Watchdog time.Duration
	// PreemptTimeout is how long a command an engine has asked to give way
	// to another channel may take to do so before the engine is reset
	// under it, with the same result as the watchdog's reset; zero (the
	// default) means never. i915's default is 640 ms.
	PreemptTimeout time.Duration
	// ContextSize is the bytes of engine context a preemption saves and a
	// resume restores (device.Config.ContextSize): zero means the device's
	// default, 256 KiB.
	ContextSize uint64

	// Prefetch is the managed-memory fault handler's prefetch policy
	// (managed.go; default PrefetchWindow), PrefetchPages its window
	// (default 16), and ThrashThreshold the moves after which a page
	// that keeps bouncing is mapped remotely instead (default 3;
	// negative: never).
	Prefetch        Prefetch
	PrefetchPages   int
	ThrashThreshold int
	// PrefetchDensity is PrefetchDensity's threshold in percent (default
	// 51), and Eviction how a block is chosen to leave device memory when
	// it is full (default EvictClock).
	PrefetchDensity int
	Eviction        Eviction

	// Trace, if not empty, is a file the device's trace is written to when
	// the GPU is closed: Chrome trace-event JSON, which Perfetto
	// (ui.perfetto.dev) and chrome://tracing open. Empty means the
	// environment's SOFTGPU_TRACE, so any test or benchmark can be traced
	// without a code change; empty there too means no tracing.
	Trace string
	// TraceEvents is how many of the latest events the trace keeps
	// (default SOFTGPU_TRACE_EVENTS, else 65536).
	TraceEvents int

	// Walker is how the MMU finds the pages that continue a translation:
	// fragment (default), scan or none (context.go).
	Walker Walker
}

// Ptr is a device address, as returned by Alloc.
type Ptr uint64

// Engine names an engine; Compute runs kernels, Copy runs copies.
type Engine = abi.Engine

const (
	Compute = abi.EngineCompute
	Copy    = abi.EngineCopy
)

// GPU is an open device and its driver.
type GPU struct {
	drv      *driver.Driver
	channels [abi.NumEngines]*driver.Channel // each engine's channel
	powerOff func()                          // closes the device: stops its engines, unmaps its memory

	trace     *trace.Buffer
	tracePath string
}

// Open starts a device with its engines and binds a driver to it.
func Open(cfg Config) (*GPU, error) {
	g, _, err := open(cfg, false)
	return g, err
}

// open is Open, and returns the device too; stepped opens it with no
// engine goroutines, for the benchmark that measures a command's path on
// one goroutine (device/stepped.go, export_test.go).
func open(cfg Config, stepped bool) (*GPU, *device.Device, error) {
	g := &GPU{}
	if err := g.openTrace(cfg); err != nil {
		return nil, nil, err
	}
	if cfg.Watchdog < 0 {
		return nil, nil, fmt.Errorf("%w: Watchdog %v is negative", ErrConfig, cfg.Watchdog)
	}
	if cfg.PreemptTimeout < 0 {
		return nil, nil, fmt.Errorf("%w: PreemptTimeout %v is negative", ErrConfig, cfg.PreemptTimeout)
	}
	dev, err := device.Open(device.Config{MemorySize: cfg.MemorySize, YieldEvery: cfg.YieldEvery, RingSize: cfg.RingSize, Trace: g.trace,
		Walker: cfg.Walker, ContextSize: cfg.ContextSize, Stepped: stepped})
	if errors.Is(err, device.ErrConfig) {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err != nil {
		return nil, nil, err
	}
	drv, err := driver.New(dev, driver.Config{YieldEvery: cfg.YieldEvery, Wait: cfg.Wait, PollBudget: cfg.PollBudget,
		Delivery: cfg.Delivery, Wake: cfg.Wake, BounceChunk: cfg.BounceChunk, BounceBuffers: cfg.BounceBuffers,
		Idle:     driver.Idle{Mode: cfg.Idle, Budget: cfg.IdleBudget, BudgetMin: cfg.IdleBudgetMin, BudgetMax: cfg.IdleBudgetMax},
		Watchdog: uint64(cfg.Watchdog), Prefetch: cfg.Prefetch, PrefetchPages: cfg.PrefetchPages, ThrashThreshold: cfg.ThrashThreshold,
		PrefetchDensity: cfg.PrefetchDensity, Eviction: cfg.Eviction, PreemptTimeout: uint64(cfg.PreemptTimeout)})
	if err != nil {
		dev.Close()
		return nil, nil, err
	}
	g.drv, g.powerOff = drv, dev.Close
	for e := range abi.Engine(abi.NumEngines) {
		g.channels[e], _ = drv.Channel(abi.DefaultChannel(e)) // a channel of the device: cannot fail
	}
	return g, dev, nil
}

// Close stops the device. Calls in progress and later calls fail with
// ErrClosed. If tracing, it then writes the trace; an error doing so is
// Close's error.
func (g *GPU) Close() error {
	err := g.drv.Close()
	g.powerOff()
	if g.tracePath != "" {
		path := g.tracePath
		g.tracePath = "" // written once
		if terr := g.writeTraceFile(path); terr != nil && err == nil {
			err = terr
		}
	}
	return err
}

// channel returns engine e's channel, or an error for an engine the device
// does not have.
func (g *GPU) channel(e Engine) (*driver.Channel, error) {
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	return g.channels[e], nil
}

// submit runs cmd on engine e and waits for it.
func (g *GPU) submit(e Engine, cmd abi.Command) error {
	ch, err := g.channel(e)
	if err != nil {
		return err
	}
	return ch.Submit(cmd)
}

// Alloc reserves size bytes of device memory.
func (g *GPU) Alloc(size uint64) (Ptr, error) {
	addr, err := g.drv.Alloc(size)
	return Ptr(addr), err
}

// Free releases memory returned by Alloc.
func (g *GPU) Free(p Ptr) error { return g.drv.Free(uint64(p)) }

// Write copies host memory to the device (host to device, "H2D"). The copy
// engine does it: straight from src if src is memory from HostAlloc, else
// through pinned bounce buffers.
func (g *GPU) Write(dst Ptr, src []byte) error { return g.drv.CopyToDevice(uint64(dst), src) }

// Read copies device memory to the host (device to host, "D2H"), by the copy
// engine like Write.
func (g *GPU) Read(dst []byte, src Ptr) error { return g.drv.CopyFromDevice(dst, uint64(src)) }

// ANCHOR: fill

// Fill sets size bytes at dst to value, on the copy engine.
func (g *GPU) Fill(dst Ptr, size uint64, value byte) error {
	return g.submit(Copy, abi.Command{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)})
}

// ANCHOR_END: fill

// Copy copies size bytes from src to dst in device memory, on the copy engine.
func (g *GPU) Copy(dst, src Ptr, size uint64) error {
	return g.submit(Copy, abi.Command{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Sum32 runs the SUM32 kernel on the compute engine: the sum of the size/4
// little-endian uint32 words at src is stored as a uint64 at dst. src and
// size must be multiples of 4, dst of 8.
func (g *GPU) Sum32(dst, src Ptr, size uint64) error {
	return g.submit(Compute, abi.Command{Op: abi.OpSum32, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Add32 runs the ADD32 kernel on the compute engine: addend is added to each
// of the size/4 little-endian uint32 words at dst (wrapping). dst and size
// must be multiples of 4.
func (g *GPU) Add32(dst Ptr, size uint64, addend uint32) error {
	return g.submit(Compute, abi.Command{Op: abi.OpAdd32, Dst: uint64(dst), Size: size, Value: uint64(addend)})
}

// Nop runs a command that does nothing on engine e: a round trip through the
// submission path and back.
func (g *GPU) Nop(e Engine) error { return g.submit(e, abi.Command{Op: abi.OpNop}) }

// Delay keeps engine e busy for the given number of cycles (nanoseconds).
func (g *GPU) Delay(e Engine, cycles uint64) error {
	return g.submit(e, abi.Command{Op: abi.OpDelay, Value: cycles})
}

// MemoryInUse reports the bytes of device memory currently allocated.
func (g *GPU) MemoryInUse() uint64 { return g.drv.MemoryInUse() }

// MemorySize reports the device memory allocations can use: all of it but
// the driver's own (page tables, runlists, the fault buffer).
func (g *GPU) MemorySize() uint64 { return g.drv.MemorySize() }

// Now returns the device clock in cycles (nanoseconds since Open).
func (g *GPU) Now() uint64 { return g.drv.Now() }

// String describes the device for logs.
func (g *GPU) String() string {
	return fmt.Sprintf("softgpu (%d bytes of device memory)", g.drv.MemorySize())
}

// traceEnv reads the tracing settings from the environment.
func traceEnv(cfg *Config) error {
	if cfg.Trace == "" {
		cfg.Trace = os.Getenv("SOFTGPU_TRACE")
	}
	if v := os.Getenv("SOFTGPU_TRACE_EVENTS"); cfg.TraceEvents == 0 && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: SOFTGPU_TRACE_EVENTS=%q is not a positive number", ErrConfig, v)
		}
		cfg.TraceEvents = n
	}
	if cfg.TraceEvents < 0 {
		return fmt.Errorf("%w: TraceEvents %d is negative", ErrConfig, cfg.TraceEvents)
	}
	return nil
}
