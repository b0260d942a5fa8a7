package driver

import "unsafe"

// addressOf returns the host address of b's first byte, as a DMA window
// entry records it. b must not be empty. The address is only ever compared
// and stored in a register, never turned back into a pointer here.
func addressOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
