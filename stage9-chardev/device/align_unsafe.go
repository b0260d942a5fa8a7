package device

import (
	"sync/atomic"
	"unsafe"
)

// cacheLine is the alignment of every structure the driver and the device
// share: a word or a slot never straddles two lines, so the one-writer-per-line
// rule in package abi holds in memory as well as on paper.
const cacheLine = 64

// alignedBytes returns n zeroed bytes whose first byte sits on a cache-line
// boundary. Go's allocator gives no alignment promise beyond the element
// type's, so allocate a line more and slice off the misaligned head.
func alignedBytes(n int) []byte {
	raw := make([]byte, n+cacheLine)
	skip := (cacheLine - int(uintptr(unsafe.Pointer(&raw[0]))%cacheLine)) % cacheLine
	return raw[skip : skip+n : skip+n]
}

// alignedWords returns n zeroed atomic words starting on a cache-line
// boundary, for the same reason as alignedBytes.
func alignedWords(n int) []atomic.Uint64 {
	const perLine = cacheLine / 8
	raw := make([]atomic.Uint64, n+perLine)
	skip := (cacheLine - int(uintptr(unsafe.Pointer(&raw[0]))%cacheLine)) % cacheLine / 8
	return raw[skip : skip+n : skip+n]
}
