package device

import (
	"sync/atomic"
	"unsafe"

	"softgpu/stage9-chardev/abi"
)

// loadPTE reads the page-table entry at device physical address pa with one
// atomic 64-bit load, pairing with the driver's atomic store of it. pa must
// be 8-aligned and inside mem (the caller checks; the index below panics
// otherwise, which the walk never lets happen).
func loadPTE(mem []byte, pa uint64) abi.PTE {
	return abi.PTE(atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[pa : pa+8][0]))))
}

// countRun counts the entries of the table at pa, from index first up to
// (not including) last, that equal want, want+step, want+2*step, …: a run
// of pages whose frames follow one another, whatever their fragment fields
// and accessed bits say (WalkerScan ignores the first; the second is not the
// mapping's). Each entry is one atomic load, as in loadPTE. The caller keeps
// [first, last) inside the table.
func countRun(mem []byte, pa, first, last uint64, want abi.PTE, step uint64) uint64 {
	if first >= last {
		return 0
	}
	tbl := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[pa : pa+abi.TableBytes][0])), abi.TableSlots)
	k := uint64(0)
	for i := first; i < last; i++ {
		if abi.PTE(atomic.LoadUint64(&tbl[i]))&^(abi.PTEFragmentMask|abi.PTEAccessed) != want {
			break
		}
		want += abi.PTE(step)
		k++
	}
	return k
}
