package device

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
)

// The pointer work of shared.go: viewing mapped bytes as atomic words,
// and mapping a file over addresses the device already holds.

// words returns the register space as atomic words.
func (m *memory) words() []atomic.Uint64 {
	return unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&m.regs[0])), len(m.regs)/8)
}

// ring returns channel c's submission and completion rings.
func (m *memory) ring(c abi.Channel, ringSize uint64) ([]byte, []atomic.Uint64) {
	slots, compl := SlotsSize(ringSize), CompletionsSize(ringSize)
	base := uint64(c) * (slots + compl)
	ring := m.rings[base : base+ringSize*abi.CommandSize : base+ringSize*abi.CommandSize]
	cw := m.rings[base+slots : base+slots+compl]
	words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&cw[0])), ringSize*abi.CompletionWords)
	return ring, words
}

// mapFixed maps len(dst) bytes over dst's own addresses: from f at off,
// shared, or, with f nil, fresh private zeroed pages.
func mapFixed(dst []byte, f *os.File, off uint64) error {
	fd, flags := -1, unix.MAP_FIXED|unix.MAP_PRIVATE|unix.MAP_ANONYMOUS
	if f != nil {
		fd, flags = int(f.Fd()), unix.MAP_FIXED|unix.MAP_SHARED
	}
	_, err := unix.MmapPtr(fd, int64(off), unsafe.Pointer(&dst[0]), uintptr(len(dst)), unix.PROT_READ|unix.PROT_WRITE, flags)
	if f != nil {
		runtime.KeepAlive(f)
	}
	if err != nil {
		return fmt.Errorf("softgpu: mmap over %d bytes: %w", len(dst), err)
	}
	return nil
}
