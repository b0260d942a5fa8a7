package driver

import (
	"fmt"

	"softgpu/stage6-runlist/abi"
)

// Copies between host memory and device memory. The copy engine does them,
// by DMA: the CPU never stores into device memory. A slice inside pinned
// memory from HostAlloc is copied by one COPY that names its bus address;
// any other slice is staged through the bounce ring (bounce.go).
//
// A copy is synchronous: it returns when the engine has finished with the
// caller's memory. Its COPYs go into the copy engine's ring behind every
// command submitted there before it, so they run after those. A command
// submitted without waiting to the compute engine is ordered with a copy
// only once its Pending has been waited for.

// ANCHOR: copy

// CopyToDevice copies src into device memory at dst.
func (d *Driver) CopyToDevice(dst uint64, src []byte) error {
	if err := d.checkRange(dst, uint64(len(src))); err != nil || len(src) == 0 {
		return err
	}
	if bus, ok := d.pinnedBus(src); ok {
		return d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: bus, Dst: dst, Size: uint64(len(src))})
	}
	return d.stageToDevice(dst, src)
}

// CopyFromDevice copies device memory at src into dst.
func (d *Driver) CopyFromDevice(dst []byte, src uint64) error {
	if err := d.checkRange(src, uint64(len(dst))); err != nil || len(dst) == 0 {
		return err
	}
	if bus, ok := d.pinnedBus(dst); ok {
		return d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: src, Dst: bus, Size: uint64(len(dst))})
	}
	return d.stageFromDevice(dst, src)
}

// ANCHOR_END: copy

// checkRange returns an error wrapping abi.StatusOutOfRange if any of
// [addr, addr+size) lies outside device memory. The engine would refuse
// the COPY too; checking first means a bad copy fails before its first
// chunk has moved.
func (d *Driver) checkRange(addr, size uint64) error {
	if d.closed.Load() {
		return ErrClosed
	}
	end := addr + size
	if end < addr || end > d.vm.dataSize {
		return fmt.Errorf("%w: [%#x, %#x+%d) is outside %d bytes of device memory", abi.StatusOutOfRange, addr, addr, size, d.vm.dataSize)
	}
	return nil
}
