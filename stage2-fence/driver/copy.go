package driver

import (
	"fmt"

	"softgpu/stage2-fence/abi"
)

// Copies between ordinary Go slices and device memory. In stage 0 they are
// done by the CPU through the host-visible window onto device memory: no
// command, no engine. (Stage 3 replaces this with DMA by the copy engine from
// pinned host memory.)
//
// A copy is ordered after every command that has completed and before every
// command submitted after it returns, because Submit waits for completion and
// its doorbell store publishes everything written before it. A command
// submitted without waiting (SubmitBatch) is ordered with a copy only once
// its Pending has been waited for.

// ANCHOR: copy
// CopyToDevice copies src into device memory at dst.
func (d *Driver) CopyToDevice(dst uint64, src []byte) error {
	window, err := d.window(dst, uint64(len(src)))
	if err != nil {
		return err
	}
	copy(window, src)
	return nil
}

// CopyFromDevice copies device memory at src into dst.
func (d *Driver) CopyFromDevice(dst []byte, src uint64) error {
	window, err := d.window(src, uint64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, window)
	return nil
}

// ANCHOR_END: copy

// window returns device memory [addr, addr+size), or an error wrapping
// abi.StatusOutOfRange if any of it lies outside device memory.
func (d *Driver) window(addr, size uint64) ([]byte, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	end := addr + size
	if end < addr || end > d.memSize {
		return nil, fmt.Errorf("%w: [%#x, %#x+%d) is outside %d bytes of device memory", abi.StatusOutOfRange, addr, addr, size, d.memSize)
	}
	return d.dev.Memory()[addr:end:end], nil
}
