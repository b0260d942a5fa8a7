package server_test

import (
	"sync/atomic"
	"unsafe"
)

// word returns the 64-bit word at byte offset off of a mapping shared with
// the daemon, for atomic loads and stores: the doorbell a raw client
// rings, the completions and fault word it reads. off must be 8-aligned
// (every register and completion word is); mappings are page-aligned.
func word(mapping []byte, off uint64) *atomic.Uint64 {
	_ = mapping[off+7]
	return (*atomic.Uint64)(unsafe.Pointer(&mapping[off]))
}

// addressOf returns the address of b's first byte: a hostile client reads
// its page's entry in /proc/self/pagemap by it.
func addressOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
