package device

import (
	"sync/atomic"
	"unsafe"

	"softgpu/stage5-vm/abi"
)

// loadPTE reads the page-table entry at device physical address pa with one
// atomic 64-bit load, pairing with the driver's atomic store of it. pa must
// be 8-aligned and inside mem (the caller checks; the index below panics
// otherwise, which the walk never lets happen).
func loadPTE(mem []byte, pa uint64) abi.PTE {
	return abi.PTE(atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0]))))
}
