// Package softgpu is the user-facing API of the device: what a CUDA-like
// runtime library gives an application. Open a device, allocate device
// memory, copy data in and out, fill, copy and run kernels on the engines,
// close.
//
// Every call here is synchronous: it returns when the device has finished.
// Underneath, package driver writes one command into a channel's mailbox,
// rings its doorbell and spins until the engine publishes completion,
// holding one global lock the whole time (see the stage README).
package softgpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/device"
	"softgpu/stage0-mailbox/driver"
	"softgpu/stage0-mailbox/trace"
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

	// Trace, if not empty, is a file the device's trace is written to when
	// the GPU is closed: Chrome trace-event JSON, which Perfetto
	// (ui.perfetto.dev) and chrome://tracing open. Empty means the
	// environment's SOFTGPU_TRACE, so any test or benchmark can be traced
	// without a code change; empty there too means no tracing.
	Trace string
	// TraceEvents is how many of the latest events the trace keeps
	// (default SOFTGPU_TRACE_EVENTS, else 65536).
	TraceEvents int
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
	dev, err := device.Open(device.Config{MemorySize: cfg.MemorySize, YieldEvery: cfg.YieldEvery, Trace: g.trace, Stepped: stepped})
	if errors.Is(err, device.ErrConfig) {
		return nil, nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err != nil {
		return nil, nil, err
	}
	drv, err := driver.New(dev, driver.Config{YieldEvery: cfg.YieldEvery})
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

// Write copies host memory to the device (host to device, "H2D").
func (g *GPU) Write(dst Ptr, src []byte) error { return g.drv.CopyToDevice(uint64(dst), src) }

// Read copies device memory to the host (device to host, "D2H").
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
