package device

import "unsafe"

// hostBytes returns the size bytes of host memory at host address addr, as
// a DMA window entry names them.
//
// The address comes from a register, so it is an integer; Go needs a
// pointer. The conversion is sound because the driver registers only memory
// it mapped itself (mmap), outside the Go heap: the garbage collector
// neither moves nor frees it, and the hold protocol in dma.go keeps the
// driver from unmapping it while this slice is in use. vet's unsafeptr check
// flags a plain unsafe.Pointer(uintptr(addr)), because a uintptr usually
// holds a Go pointer that the collector could free under it; reading the
// integer's bytes as a pointer says, to vet and to the reader, that this
// one is not such a pointer.
func hostBytes(addr, size uint64) []byte {
	p := uintptr(addr)
	return unsafe.Slice(*(**byte)(unsafe.Pointer(&p)), size)
}
