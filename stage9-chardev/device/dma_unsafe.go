package device

import "unsafe"

// addressOf returns the host address of b's first byte, the number a DMA
// window entry names it by. b must not be empty. The address is only ever
// compared; the device keeps b itself to reach the memory, and never turns
// an address back into a pointer.
func addressOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
