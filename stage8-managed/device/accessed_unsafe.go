package device

import (
	"sync/atomic"
	"unsafe"

	"softgpu/stage8-managed/abi"
)

// The accessed bit (abi.PTEAccessed), the engine's side: an engine that
// reads a valid 4 KiB leaf entry from its table — a walk that fills a TLB
// entry, or the entries a translation reads to extend a run — sets the
// bit in it, as a real MMU does, so the driver can tell which pages were
// used since it last looked (driver/evict.go). A TLB hit sets nothing.
//
// The store is a compare-and-swap from the entry the engine read to the
// same entry with the bit: if the driver has changed the entry meanwhile
// (cleared it to move the page away, or cleared the bit), the swap fails
// and nothing is written — the bit never lands on an entry it was not
// read from, and a not-valid managed entry never gains it. An entry with
// the bit already set costs one load and no store.

// markAccessed sets the accessed bit of the leaf entry at pa, which was
// read as pte, if pte is a valid 4 KiB page without it.
func markAccessed(mem []byte, pa uint64, pte abi.PTE) {
	if !pte.Valid() || pte.Accessed() || pte.Kind() != abi.PTEPage4K {
		return
	}
	atomic.CompareAndSwapUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0])), uint64(pte), uint64(pte|abi.PTEAccessed))
}

// markRun sets the accessed bit of the entries [first, last) of the leaf
// table at pa, each as markAccessed does: the pages of a run that
// contiguous4K counted. The caller keeps [first, last) inside the table.
func markRun(mem []byte, pa, first, last uint64) {
	if first >= last {
		return
	}
	tbl := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[pa : pa+abi.TableBytes][0])), abi.TableSlots)
	for i := first; i < last; i++ {
		if pte := abi.PTE(atomic.LoadUint64(&tbl[i])); pte.Valid() && !pte.Accessed() && pte.Kind() == abi.PTEPage4K {
			atomic.CompareAndSwapUint64(&tbl[i], uint64(pte), uint64(pte|abi.PTEAccessed))
		}
	}
}
