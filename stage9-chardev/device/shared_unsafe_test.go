package device

import (
	"sync/atomic"
	"unsafe"
)

// storeWord is a client's atomic store to a word of its mapping.
func storeWord(b *[8]byte, v uint64) { (*atomic.Uint64)(unsafe.Pointer(b)).Store(v) }

// wordAt is the word at byte off of a mapping, for atomic loads.
func wordAt(b []byte, off uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }
