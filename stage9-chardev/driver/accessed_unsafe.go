package driver

import (
	"sync/atomic"
	"unsafe"

	"softgpu/stage9-chardev/abi"
)

// The accessed bit (abi.PTEAccessed), the driver's side: the eviction
// clock reads and clears it (evict.go). The engines set it with a
// compare-and-swap (device/accessed_unsafe.go); this clears it the same
// way, so that neither side's write is lost to the other's.

// clearAccessed clears the accessed bit of the entry at pa and reports
// whether it was set. The compare-and-swap fails only if an engine set
// the bit meanwhile (the driver's own stores happen under um.mu, which
// the caller holds): then it tries again.
func clearAccessed(mem []byte, pa uint64) bool {
	word := (*uint64)(unsafe.Pointer(&mem[pa : pa+8][0]))
	for {
		e := abi.PTE(atomic.LoadUint64(word))
		if !e.Accessed() {
			return false
		}
		if atomic.CompareAndSwapUint64(word, uint64(e), uint64(e&^abi.PTEAccessed)) {
			return true
		}
	}
}
