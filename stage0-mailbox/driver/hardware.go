package driver

import (
	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/mmio"
)

// ANCHOR: hardware

// Hardware is everything the driver may use of a device — what a real
// driver reaches through the device's BARs — and nothing else:
//
//   - the register space, read and written by the offsets of package abi;
//   - device memory, which this model makes host-visible in full;
//   - each channel's command slot, memory the engine reads after the
//     doorbell.
//
// The driver never calls into an engine, never reads the device's clock
// except through abi.RegTimestamp, and learns that the device has stopped
// from abi.RegDeviceState. *device.Device implements Hardware; a later
// stage serves the same surface from memory shared with another process.
type Hardware interface {
	Registers() *mmio.Registers
	Memory() []byte
	CommandSlot(c abi.Channel) []byte
}

// ANCHOR_END: hardware
