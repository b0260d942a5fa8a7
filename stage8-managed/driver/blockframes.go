package driver

import (
	"math/bits"
	"slices"

	"softgpu/stage8-managed/abi"
)

// Big pages for managed blocks: a block the fault handler moves whole
// (blocks.go, serveBlock) lands in one run of consecutive frames, aligned
// as its addresses are, and its entries are given the fragment field that
// says so (fragment.go) — so an engine caches one TLB entry for the block,
// not one per 4 KiB page, as NVIDIA's UVM maps a fully resident 2 MiB
// block with a big page. A block that moves piecemeal gets what its frames
// happen to form: serveBlock recomputes the fields after every migration.
//
// The split is fragment.go's: a page that leaves (toHost) has its entry
// cleared and the fields of its window recomputed before the ranged
// invalidation, which drops every engine's entry for the old block, since
// each overlaps the range. No rule here is new; this file only finds the
// frames.
//
// Where the run comes from: the pool, if it holds one (poolRun); else,
// if the pool has too few frames for the block anyway, the allocator, as
// frameChunk chunks at consecutive addresses, so that the pool gives each
// back on its own when its frames are free (releaseChunks). So the pool
// takes from the allocator at most a block's worth more than frame would
// have, never memory it could have served the block from. A pool with
// enough frames in pieces, or a run the allocator cannot give —
// device memory full or in pieces, or another allocation taking part of the
// range between the probe and the chunks — leaves the pool as it was or
// with chunks that are not consecutive: the block still moves, through the
// pool and eviction as before, and its fields say what it got.
//
// Invariant: the frames blockFrames pushes are on top of um.frames in
// ascending order, so toDevice pops them for the block's pages in order.

// blockFrames makes the next hi-lo frames the pool hands out a run of
// consecutive frames aligned like page lo of m, if the allocator has one,
// for the block [lo, hi) of m that serveBlock is about to move whole. It
// reports whether it did. The caller holds um.mu.
func (d *Driver) blockFrames(m *Managed, lo, hi int) bool {
	u := &d.um
	size := (uint64(hi-lo)<<abi.PageShift + frameChunk - 1) &^ (frameChunk - 1)
	va := m.va + uint64(lo)<<abi.PageShift
	align := max(min(fragmentAlign(size, abi.Page4K), va&-va), frameChunk)
	if align < 2*frameChunk {
		return false // no fragment larger than a chunk to gain: the pool's chunks do as well
	}
	if d.poolRun(hi-lo, align) {
		return true
	}
	if len(u.frames) >= hi-lo {
		return false // the pool can hold the block, if not as one run: take no memory it would not
	}
	base, err := d.alloc.AllocAligned(size, align)
	if err != nil {
		return false
	}
	d.alloc.Free(base) // found; now taken again as chunks, each freed on its own
	var chunks []uint64
	whole := true
	for at := base; at < base+size; at += frameChunk {
		c, err := d.alloc.AllocAlignedFrom(frameChunk, frameChunk, at)
		if err != nil {
			whole = false
			break
		}
		whole = whole && c == at
		chunks = append(chunks, c)
	}
	// Highest first, each chunk's frames highest first: popped from the
	// end, they come out in ascending order (the invariant above).
	for k := len(chunks) - 1; k >= 0; k-- {
		u.chunks[chunks[k]] = 0
		for f := chunks[k] + frameChunk - 1<<abi.PageShift; ; f -= 1 << abi.PageShift {
			u.frames = append(u.frames, f)
			if f == chunks[k] {
				break
			}
		}
	}
	return whole
}

// poolRun looks among the pool's free frames for n consecutive ones from
// an address aligned to align — a block that left whole comes back to the
// pool so (toHost frees its frames highest first) — and puts them on top,
// in ascending order. It reports whether it found them, so that a block
// that goes back and forth takes its run again, not fresh memory each
// time. The caller holds um.mu.
func (d *Driver) poolRun(n int, align uint64) bool {
	u := &d.um
	if len(u.frames) < n {
		return false
	}
	top := len(u.frames) - 1
	runAt := func(base uint64, present func(uint64) bool) bool {
		for k := range n {
			if !present(base + uint64(k)<<abi.PageShift) {
				return false
			}
		}
		return true
	}
	if base := u.frames[top]; base%align == 0 && runAt(base, func(f uint64) bool { // already on top, the common case
		k := int(f-base) >> abi.PageShift
		return u.frames[top-k] == f
	}) {
		return true
	}
	free := make(map[uint64]bool, len(u.frames))
	for _, f := range u.frames {
		free[f] = true
	}
	for _, base := range u.frames {
		if base%align != 0 || !runAt(base, func(f uint64) bool { return free[f] }) {
			continue
		}
		end := base + uint64(n)<<abi.PageShift
		u.frames = slices.DeleteFunc(u.frames, func(f uint64) bool { return f >= base && f < end })
		for f := end - 1<<abi.PageShift; ; f -= 1 << abi.PageShift {
			u.frames = append(u.frames, f)
			if f == base {
				break
			}
		}
		return true
	}
	return false
}

// wholeOnHost reports whether every page of [lo, hi) of m is on the host,
// so that a migration of them all can take a run of fresh frames. The
// caller holds um.mu.
func wholeOnHost(m *Managed, lo, hi int) bool {
	for i := lo; i < hi; i++ {
		if m.pages[i].where != pageHost {
			return false
		}
	}
	return true
}

// managedVAAlign returns the alignment to give the addresses of a managed
// allocation of rounded bytes: its largest power of two, up to a block's
// 2 MiB, and at least a frame chunk, so that a whole block can form a
// fragment of its own size (blockFrames).
func managedVAAlign(rounded uint64) uint64 {
	a := uint64(1) << (63 - bits.LeadingZeros64(rounded))
	return max(min(a, blockPages<<abi.PageShift), frameChunk)
}
