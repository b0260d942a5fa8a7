package driver

import (
	"slices"

	"softgpu/stage9-chardev/abi"
)

// Serving a batch by block: the fault handler (faults.go) hands over the
// pages a batch of records named — de-duplicated, not stale, sorted by
// allocation and page — and this file coalesces them by 2 MiB block of
// their allocation, as NVIDIA's UVM driver services a batch per VA block.
// For each block it asks the prefetch policy which pages move with the
// faulted ones, merges that into spans, and moves the spans as one
// migration: one trace event, one count in ManagedStats.Migrations.
//
// The policies (Config.Prefetch):
//
//	off       the faulted pages
//	window    each faulted page's aligned window of PrefetchPages pages
//	adaptive  a window from the first faulted page not yet covered, which
//	          doubles while the faults follow on (faults.go, window)
//	density   UVM's (uvm_perf_prefetch): a binary tree over the block's
//	          pages; for each faulted page not yet covered, the largest
//	          subtree around it in which more than PrefetchDensity percent
//	          of the pages are resident or faulting in this batch
//
// A dense block — most of it faulted or already there — moves whole; a
// sparse one moves its faulted pages and little else. The fixed window
// moves its window whatever the block looks like, which on a random
// access pattern is mostly pages nobody touches.
//
// Invariant: every faulted page that is on the host lies in some span, so
// a batch never leaves a page it was asked for behind (the replay would
// fault on it again, and the channel would make no progress).

// blockPages is the pages of a block: 2 MiB.
const blockPages = 512

// DefaultPrefetchDensity is PrefetchDensity's threshold, UVM's default:
// a subtree moves whole when more than 51 % of it is resident or faulting.
const DefaultPrefetchDensity = 51

// faultedPage is a page a batch named.
type faultedPage struct {
	m   *Managed
	idx int
}

// pageSpan is the pages [first, end) of an allocation.
type pageSpan struct{ first, end int }

// serveBlocks moves the faulted pages, block by block, and returns how
// many pages moved. The caller holds um.mu.
func (d *Driver) serveBlocks(faulted []faultedPage) uint64 {
	var migrated uint64
	for i := 0; i < len(faulted); {
		m, block := faulted[i].m, faulted[i].idx/blockPages
		j := i + 1
		for j < len(faulted) && faulted[j].m == m && faulted[j].idx/blockPages == block {
			j++
		}
		migrated += uint64(d.serveBlock(m, block, faulted[i:j]))
		i = j
	}
	return migrated
}

// ANCHOR: serveblock

// serveBlock moves the faulted pages of one block of m, with the prefetch
// policy's choice around them, as one migration, and returns how many
// pages moved. The faulted pages are in address order.
func (d *Driver) serveBlock(m *Managed, block int, faulted []faultedPage) int {
	u := &d.um
	lo, hi := block*blockPages, min((block+1)*blockPages, len(m.pages))
	spans := u.spans[:0]
	if u.policy == PrefetchDensity {
		d.occupancy(m, lo, hi, faulted)
	}
	covered := 0 // the pages before it are in a span already
	for _, f := range faulted {
		if f.idx < covered {
			continue
		}
		var s pageSpan
		switch u.policy {
		case PrefetchOff:
			s = pageSpan{f.idx, f.idx + 1}
		case PrefetchDensity:
			s = d.densitySpan(lo, hi, f.idx)
		default:
			first, n := d.window(m, f.idx) // faults.go
			s = pageSpan{first, min(first+n, len(m.pages))}
		}
		spans = append(spans, s)
		covered = max(covered, s.end)
	}
	// Density's subtrees nest or are apart: sort, and merge what overlaps
	// or touches, so each page is asked for once and runs stay long.
	slices.SortFunc(spans, func(a, b pageSpan) int { return a.first - b.first })
	merged := spans[:0]
	for _, s := range spans {
		if k := len(merged) - 1; k >= 0 && s.first <= merged[k].end {
			merged[k].end = max(merged[k].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	u.spans = merged
	if len(merged) == 1 && merged[0] == (pageSpan{lo, hi}) && wholeOnHost(m, lo, hi) {
		d.blockFrames(m, lo, hi) // one run of frames: one fragment (blockframes.go)
	}
	start := d.Now()
	moved := 0
	for _, s := range merged {
		moved += d.toDevice(m, s.first, s.end-s.first)
	}
	if moved > 0 { // after every entry is stored, as a fragment that grows must be (fragment.go)
		d.refragment(m.ctx.root, m.va+uint64(lo)<<abi.PageShift, uint64(hi-lo)<<abi.PageShift)
	}
	faultedMoved := 0 // moved just now: on the device, changed since start
	for _, f := range faulted {
		if p := &m.pages[f.idx]; p.where == pageDevice && p.changed >= start {
			faultedMoved++
		}
	}
	u.stats.Prefetched += uint64(moved - faultedMoved)
	if moved > 0 {
		u.stats.Migrations++
	}
	d.migrateTrace(start, moved, ToDevice)
	return moved
}

// ANCHOR_END: serveblock

// occupancy counts, into u.occupied, the pages of block [lo, hi) of m that
// are resident (on the device, or mapped remotely) or faulted in this
// batch: occupied[i] is how many of the block's first i pages are.
func (d *Driver) occupancy(m *Managed, lo, hi int, faulted []faultedPage) {
	u := &d.um
	n := hi - lo
	occ := slices.Grow(u.occupied[:0], n+1)[:n+1]
	occ[0] = 0
	k := 0 // faulted is in address order: walk it beside the pages
	for i := range n {
		busy := m.pages[lo+i].where != pageHost
		for k < len(faulted) && faulted[k].idx < lo+i {
			k++
		}
		if k < len(faulted) && faulted[k].idx == lo+i {
			busy = true
		}
		occ[i+1] = occ[i]
		if busy {
			occ[i+1]++
		}
	}
	u.occupied = occ
}

// ANCHOR: density

// densitySpan returns the largest subtree of block [lo, hi) that holds
// page idx and in which more than u.density percent of the pages are
// occupied (occupancy): the tree's nodes are the block's aligned
// power-of-two runs of pages, from the whole block down to idx alone,
// which always qualifies.
func (d *Driver) densitySpan(lo, hi, idx int) pageSpan {
	occ := d.um.occupied
	r := idx - lo
	for size := blockPages; size > 1; size /= 2 {
		first := r &^ (size - 1)
		end := min(first+size, hi-lo)
		if first >= end {
			continue
		}
		if (occ[end]-occ[first])*100 > d.um.density*(end-first) {
			return pageSpan{lo + first, lo + end}
		}
	}
	return pageSpan{idx, idx + 1}
}

// ANCHOR_END: density
