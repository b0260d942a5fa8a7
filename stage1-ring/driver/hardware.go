package driver

import (
	"sync/atomic"

	"softgpu/stage1-ring/abi"
	"softgpu/stage1-ring/mmio"
)

// ANCHOR: hardware

// Hardware is everything the driver may use of a device — what a real
// driver reaches through the device's BARs — and nothing else:
//
//   - the register space, read and written by the offsets of package abi;
//   - device memory, which this model makes host-visible in full;
//   - each channel's two rings: the submission ring the driver writes and
//     the engine reads after the doorbell, and the completion ring the
//     engine writes.
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
}

// ANCHOR_END: hardware
