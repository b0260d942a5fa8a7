package server

import (
	"sync/atomic"
	"unsafe"
)

// sharedWord is the 64-bit word at the start of b, a page mapped shared
// with another process (punch.go's clock): page-aligned, so aligned for
// atomic access.
func sharedWord(b []byte) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&b[0]))
}
