package driver

import (
	"sync/atomic"

	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/mmio"
	"softgpu/stage6-runlist/trace"
)

// ANCHOR: hardware

// Hardware is everything the driver may use of a device — what a real
// driver reaches through the device's BARs — and nothing else:
//
//   - the register space, read and written by the offsets of package abi;
//   - device memory, which this model makes host-visible in full;
//   - each channel's two rings: the submission ring the driver writes and
//     the engine reads after the doorbell, and the completion ring the
//     engine writes;
//   - the interrupt line, which holds a token whenever the device has
//     raised it since the driver last looked (the cause is in
//     abi.RegIrqCause);
//   - the trace, to record the driver's own events (nil when off);
//   - the device's table of host memory it may reach by DMA, which the
//     driver fills (the platform's IOMMU, in this model);
//   - the wake primitives: a call that wakes the engine serving a channel
//     after a doorbell found it asleep (a store to memory wakes no
//     thread), and one that wakes an engine by name, after a runlist
//     submit.
//
// The driver never calls into an engine, never reads the device's clock
// except through abi.RegTimestamp, and learns that the device has stopped
// from abi.RegDeviceState. *device.Device implements Hardware; a later
// stage serves the same surface from memory shared with another process.
type Hardware interface {
	Registers() *mmio.Registers
	Memory() []byte
	Ring(c abi.Channel) []byte
	Completions(c abi.Channel) []atomic.Uint64
	Interrupts() <-chan struct{}
	Trace() *trace.Buffer
	RegisterHost(mem []byte) error
	UnregisterHost(mem []byte) error
	Wake(c abi.Channel)
	WakeEngine(e abi.Engine)
}

// ANCHOR_END: hardware
