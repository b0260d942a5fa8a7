// Package softgpu is the user-facing API of stage 7: what a CUDA-like runtime
// library gives an application. Open a device, allocate device memory, copy
// data in and out, fill, copy and run kernels on the engines, close.
//
// Every call in this file is synchronous: it returns when the device has
// finished. Underneath, package driver writes the command into the engine's
// ring, rings its doorbell with the new tail and spins, holding no lock,
// until the engine's head passes it. batch.go adds the asynchronous calls
// that keep many commands in flight, and batches that share one doorbell
// (see the stage README). hostmem.go adds pinned host memory, which the
// copy engine reads and writes directly. Any number of goroutines may call
// all of it at once; since stage 4 submitting commands and waiting for them
// takes no lock (copies of ordinary slices still take turns on the bounce
// buffers). idle.go lets an engine with nothing to do sleep (stage 7).
package softgpu

import (
	"fmt"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/device"
	"softgpu/stage7-idle/driver"
)

// Config configures a device. The zero value is a sensible default.
type Config struct {
	// MemorySize is device memory in bytes (default 64 MiB).
	MemorySize uint64
	// YieldEvery is how many empty polls a spinning loop — an engine's, or
	// the host's while it waits — makes between runtime.Gosched calls
	// (default 64; negative: never yield).
	YieldEvery int
	// RingSize is the number of command slots in each engine's ring
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
	// (default; spin for IdleBudget cycles, then sleep), spin, or sleep.
	Idle IdleMode
	// IdleBudget is the hybrid spin in cycles (default 50,000: 50 µs).
	IdleBudget uint64
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
	dev *device.Device
	drv *driver.Driver
}

// Open starts a device with its engines and binds a driver to it.
func Open(cfg Config) (*GPU, error) {
	dev, err := device.Open(device.Config{MemorySize: cfg.MemorySize, YieldEvery: cfg.YieldEvery, RingSize: cfg.RingSize})
	if err != nil {
		return nil, err
	}
	drv, err := driver.New(dev, driver.Config{YieldEvery: cfg.YieldEvery, Wait: cfg.Wait,
		PollBudget: cfg.PollBudget, Delivery: cfg.Delivery, Wake: cfg.Wake,
		BounceChunk: cfg.BounceChunk, BounceBuffers: cfg.BounceBuffers, Idle: cfg.Idle, IdleBudget: cfg.IdleBudget})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &GPU{dev: dev, drv: drv}, nil
}

// Close stops the device. Calls in progress and later calls fail with
// driver.ErrClosed.
func (g *GPU) Close() error { return g.drv.Close() }

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
	return g.drv.Submit(abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: uint64(dst), Size: size, Value: uint64(value)})
}

// ANCHOR_END: fill

// Copy copies size bytes from src to dst in device memory, on the copy engine.
func (g *GPU) Copy(dst, src Ptr, size uint64) error {
	return g.drv.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Sum32 runs the SUM32 kernel on the compute engine: the sum of the size/4
// little-endian uint32 words at src is stored as a uint64 at dst. src and
// size must be multiples of 4, dst of 8.
func (g *GPU) Sum32(dst, src Ptr, size uint64) error {
	return g.drv.Submit(abi.EngineCompute, abi.Command{Op: abi.OpSum32, Src: uint64(src), Dst: uint64(dst), Size: size})
}

// Add32 runs the ADD32 kernel on the compute engine: addend is added to each
// of the size/4 little-endian uint32 words at dst (wrapping). dst and size
// must be multiples of 4.
func (g *GPU) Add32(dst Ptr, size uint64, addend uint32) error {
	return g.drv.Submit(abi.EngineCompute, abi.Command{Op: abi.OpAdd32, Dst: uint64(dst), Size: size, Value: uint64(addend)})
}

// Nop runs a command that does nothing on engine e: a round trip through the
// submission path and back.
func (g *GPU) Nop(e Engine) error {
	return g.drv.Submit(e, abi.Command{Op: abi.OpNop})
}

// Delay keeps engine e busy for the given number of cycles (nanoseconds).
func (g *GPU) Delay(e Engine, cycles uint64) error {
	return g.drv.Submit(e, abi.Command{Op: abi.OpDelay, Value: cycles})
}

// MemoryInUse reports the bytes of device memory currently allocated.
func (g *GPU) MemoryInUse() uint64 { return g.drv.MemoryInUse() }

// String describes the device for logs.
func (g *GPU) String() string {
	return fmt.Sprintf("softgpu (%d bytes of device memory)", len(g.dev.Memory()))
}
