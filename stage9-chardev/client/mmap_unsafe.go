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
