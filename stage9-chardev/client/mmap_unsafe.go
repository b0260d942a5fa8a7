package client

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The pointer work of the client: mapped bytes viewed as atomic words,
// files mapped over addresses the client already reserved, and the
// address of a slice.

// asWords views b, 8-aligned, as atomic words.
func asWords(b []byte) []atomic.Uint64 {
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

// addressOf is the address of b's first byte.
func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// mapOver maps f's pages at off over dst's own addresses.
func mapOver(dst []byte, f *os.File, off uint64, writable bool) error {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	_, err := unix.MmapPtr(int(f.Fd()), int64(off), unsafe.Pointer(&dst[0]), uintptr(len(dst)), prot, unix.MAP_SHARED|unix.MAP_FIXED)
	runtime.KeepAlive(f)
	if err != nil {
		return fmt.Errorf("softgpu: mapping %s: %w", f.Name(), err)
	}
	return nil
}

// zeroOver maps private zero pages over dst.
func zeroOver(dst []byte) {
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&dst[0]), uintptr(len(dst)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		panic(fmt.Sprintf("client: remapping %d bytes of its own: %v", len(dst), err))
	}
}

// copyOver puts a private, read-only copy of dst's pages in their place,
// in one step: mremap(2) moves the copy over dst under the address
// space's lock, so a reader of dst sees the old pages or the copy, both
// holding the same bytes, never a hole. dst's old pages must no longer
// change (their writer has let them go). On an error dst is as it was.
func copyOver(dst []byte) error {
	size := uintptr(len(dst))
	cp, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("softgpu: a copy of %d bytes: %w", size, err)
	}
	copied := unsafe.Slice((*byte)(cp), len(dst))
	copy(copied, dst)
	if err := unix.Mprotect(copied, unix.PROT_READ); err == nil {
		_, err = unix.MremapPtr(cp, size, unsafe.Pointer(&dst[0]), size, unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED)
	}
	if err != nil {
		unix.MunmapPtr(cp, size)
		return fmt.Errorf("softgpu: moving a copy of %d bytes in place: %w", size, err)
	}
	return nil
}
