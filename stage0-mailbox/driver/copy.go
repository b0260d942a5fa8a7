package driver

import (
	"fmt"

	"softgpu/stage0-mailbox/abi"
)

// Copies between ordinary Go slices and device memory. They are done by the CPU through the host-visible window onto device memory:
// no command, no engine.
//
// A copy is ordered after every command that has completed and before every
// command submitted after it returns, because Submit waits for completion and
// its doorbell store publishes everything written before it.

// ANCHOR: copy

// CopyToDevice copies src into device memory at dst.
func (d *Driver) CopyToDevice(dst uint64, src []byte) error {
	return d.throughAperture(dst, uint64(len(src)), func(window []byte) { copy(window, src) })
}

// CopyFromDevice copies device memory at src into dst.
func (d *Driver) CopyFromDevice(dst []byte, src uint64) error {
	return d.throughAperture(src, uint64(len(dst)), func(window []byte) { copy(dst, window) })
}

// ANCHOR_END: copy

// throughAperture runs cpy on device memory [addr, addr+size), or returns
// an error wrapping abi.StatusOutOfRange if any of it lies outside device
// memory. It holds the aperture for reading while cpy runs, so that Close
// cannot let the device unmap the memory under it.
func (d *Driver) throughAperture(addr, size uint64, cpy func(window []byte)) error {
	end := addr + size
	if end < addr || end > d.memSize {
		return fmt.Errorf("%w: [%#x, %#x+%d) is outside %d bytes of device memory", abi.StatusOutOfRange, addr, addr, size, d.memSize)
	}
	d.aperture.RLock()
	defer d.aperture.RUnlock()
	if d.closed.Load() {
		return ErrClosed
	}
	cpy(d.hw.Memory()[addr:end:end])
	return nil
}
