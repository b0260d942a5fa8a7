package driver

import (
	"sync/atomic"
	"unsafe"

	"softgpu/stage5-vm/abi"
)

// storePTE writes the page-table entry at device physical address pa with
// one atomic 64-bit store: the engines' walks read entries while the driver
// changes them, and each must see a whole entry, old or new. It pairs with
// the atomic load in device/pte_unsafe.go. pa must be 8-aligned and inside
// mem.
func storePTE(mem []byte, pa uint64, e abi.PTE) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0])), uint64(e))
}

// casPTE replaces the entry at pa with e if it still holds old, the same
// way, and reports whether it did.
func casPTE(mem []byte, pa uint64, old, e abi.PTE) bool {
	return atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0])), uint64(old), uint64(e))
}

// loadPTE reads the entry at pa the same way.
func loadPTE(mem []byte, pa uint64) abi.PTE {
	return abi.PTE(atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0]))))
}
