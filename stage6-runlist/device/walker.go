package device

import (
	"fmt"

	"softgpu/stage6-runlist/abi"
)

// This file is how the MMU learns that pages continue one another: what
// a TLB entry filled from a 4 KiB (or 64 KiB) leaf covers, and what the
// engine reads to extend a run past it (translate's loop, mmu.go).
//
// A real MMU learns contiguity from the entry it has just read, never by
// reading its neighbours: AMD's PTEs carry a fragment field, ARM's a
// contiguous bit, NVIDIA's tables big pages. Here that is the fragment
// field of a level-3 entry (abi/vm.go): the driver writes into each leaf
// the size of the aligned, physically contiguous block the page belongs
// to, and the walk caches one TLB entry for the whole block. The walker is
// a Config, so the chapter can set the three side by side:
//
//	WalkerFragment  (default) one entry per fragment block; the next block
//	                is a lookup, and on a miss a walk, like any address
//	WalkerScan      the fragment field ignored; on each fill the engine reads
//	                up to 255 following leaf entries of the same table and
//	                runs over those that continue the page (contiguous4K,
//	                nextPage) — no MMU could afford it, kept to compare with
//	WalkerNone      the fragment field ignored; one entry per page, every
//	                following page a lookup and on a miss a walk: what
//	                translation costs with nothing telling the MMU about
//	                contiguity
//
// Invariants:
//   - a TLB entry from a fragment covers [vpn<<shift, (vpn+1)<<shift) and
//     maps it onto [pa, pa+1<<shift), a block aligned to its size, inside the
//     memory of its aperture, no larger than the 2 MiB of its table;
//   - a fragment that cannot be such a block is FaultMalformed at the VA
//     walked, and nothing is cached.

// Walker is how the engines' MMU finds the pages that continue a run.
type Walker uint8

const (
	WalkerFragment Walker = iota // the default: the leaf's fragment field
	WalkerScan                   // reading the following leaf entries
	WalkerNone                   // one TLB entry per page
)

func (w Walker) String() string {
	switch w {
	case WalkerFragment:
		return "fragment"
	case WalkerScan:
		return "scan"
	case WalkerNone:
		return "none"
	}
	return fmt.Sprintf("walker(%d)", uint8(w))
}

// checkWalker rejects a walker the device does not have.
func checkWalker(cfg *Config) error {
	if cfg.Walker > WalkerNone {
		return fmt.Errorf("%w: %v is not fragment, scan or none", ErrConfig, cfg.Walker)
	}
	return nil
}

// ANCHOR: fragment

// fragmentBlock widens t, the translation of the level-3 page holding va
// that the walk read from pte, to the block pte's fragment field names —
// under WalkerFragment; the other walkers ignore the field. The block is
// input like every entry: one larger than the table, smaller than the
// page, starting at a physical address not aligned to its size or
// reaching past its aperture's memory is a malformed entry, and t is left
// alone.
func (e *Engine) fragmentBlock(t *tlbEntry, pte abi.PTE, va uint64) abi.Fault {
	f := pte.Fragment()
	if e.walker != WalkerFragment || f == 0 {
		return 0
	}
	shift := uint8(abi.PageShift + f)
	if f > abi.MaxFragment || shift < t.shift {
		return abi.FaultMalformed
	}
	block := uint64(1) << shift
	off := va & (block - 1) &^ (1<<t.shift - 1) // the page's offset in its block
	if t.pa < off || (t.pa-off)%block != 0 {
		return abi.FaultMalformed
	}
	start := t.pa - off
	if t.host {
		if start < abi.BusBase || block > abi.BusBase+abi.BusSize-start {
			return abi.FaultMalformed
		}
	} else if mem := uint64(len(e.dev.mem)); start > mem || block > mem-start {
		return abi.FaultMalformed
	}
	t.shift, t.vpn, t.pa = shift, va>>shift, start
	return 0
}

// ANCHOR_END: fragment
