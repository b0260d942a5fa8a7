package driver

import (
	"math/bits"

	"softgpu/stage9-chardev/abi"
)

// Fragments: how the driver tells the MMU which small pages continue one
// another (the field is in abi/vm.go, the walk that uses it in
// device/walker.go). Each level-3 entry carries the log2 size of the
// aligned block of VA it lies in that maps an aligned block of contiguous
// physical memory, every page of it with the same kind, permissions and
// aperture — as AMD's driver fills the fragment field of its PTEs. An
// engine caches one TLB entry for the whole block, so a 1 MiB copy through
// 4 KiB pages costs one walk per operand, not 256.
//
// The field describes the table, not a mapping: two mappings side by side
// in VA and in physical memory form one block. So every change to leaves
// recomputes the fields of the 2 MiB windows it touched, from what the
// table then holds (refragmentLocked), and an unmap inside a block splits
// it: the neighbours' fields shrink before the caller invalidates the
// range, and the invalidation drops the engines' entries for the old block,
// since every such entry overlaps the range.
//
// Order, against the engines' walks (loads of one entry at a time):
//   - a field that grows is stored after every entry of the grown block is
//     valid (mapRange stores the pages first), so a walk that reads it finds
//     the block whole;
//   - a field that shrinks is stored after the entries that left the block
//     were cleared, and before the caller's invalidate: a walk between the
//     two caches the old block, which overlaps the cleared range, and the
//     invalidation drops it.
//
// Invariant, under vm.tableMu: outside mapRange and unmapRange, every
// valid level-3 entry's fragment is the largest block of its window that
// the entries around it form (0 if none larger than the page).

// windowSlots is the number of level-3 entries of one table: a 2 MiB window.
const windowSlots = abi.TableSlots

// refragmentLocked recomputes the fragment fields of every level-3 table
// under root that maps part of [va, va+size). The caller holds
// d.vm.tableMu, so no other edit of the tables runs meanwhile.
func (d *Driver) refragmentLocked(root, va, size uint64) {
	end := va + size
	if end < va || end > 1<<abi.VABits {
		end = 1 << abi.VABits
	}
	for w := va &^ (1<<abi.LevelShift(2) - 1); w < end; {
		table, next := d.leafTable(root, w)
		if table != 0 {
			d.refragmentTable(table)
		}
		w = next
	}
}

// refragment is refragmentLocked for a caller that changed leaves on its
// own — the managed pages, which move one at a time (managed.go): once
// their entries are stored, before the caller invalidates, so that no
// neighbour's block still reaches over a page that left.
func (d *Driver) refragment(root, va, size uint64) {
	d.vm.tableMu.Lock()
	defer d.vm.tableMu.Unlock()
	d.refragmentLocked(root, va, size)
}

// leafTable returns the level-3 table under root that maps the 2 MiB
// window holding va, or 0 if there is none, and the first VA past what the
// walk found: the next window, or past the larger page or the hole it met.
func (d *Driver) leafTable(root, va uint64) (table, next uint64) {
	table = root
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		e := loadPTE(d.vm.pool.mem, table+abi.LevelIndex(va, level)*8)
		if !e.Valid() || e.Kind() != abi.PTETable {
			span := uint64(1) << abi.LevelShift(level)
			return 0, va&^(span-1) + span
		}
		table = e.Frame()
	}
	span := uint64(1) << abi.LevelShift(2)
	return table, va&^(span-1) + span
}

// ANCHOR: refragment

// refragmentTable rewrites the fragment field of every valid page entry of
// the level-3 table at table: the largest aligned block of slots holding it
// whose entries are valid pages of one kind, permissions and aperture,
// whose physical bytes follow one another from an address aligned to the
// block's size. Blocks are found bottom up: a block of 2^f slots is whole if
// both its halves are and the second continues the first. A 64 KiB page
// gets at least its own 16 slots, or 0 if its slots disagree (the walk
// would reject a fragment smaller than the page).
func (d *Driver) refragmentTable(table uint64) {
	mem := d.vm.pool.mem
	var entries [windowSlots]abi.PTE
	var frag [windowSlots]uint8
	var whole [windowSlots]bool // whole[b]: the block of the current size starting at slot b
	for i := range entries {
		e := loadPTE(mem, table+uint64(i)*8)
		entries[i] = e
		size, ok := abi.LeafSize(e, abi.LeafLevel)
		whole[i] = e.Valid() && ok && !e.Reserved() && e.Frame()%uint64(size) == 0
	}
	// all but frame, fragment and the accessed bit, which the engines set
	// as they walk (accessed_unsafe.go) and which says nothing of the mapping
	attrs := func(e abi.PTE) abi.PTE { return e & (1<<abi.PageShift - 1) &^ (abi.PTEFragmentMask | abi.PTEAccessed) }
	slotPA := func(i int) uint64 { // the physical address slot i maps
		size, _ := abi.LeafSize(entries[i], abi.LeafLevel)
		return entries[i].Frame() + uint64(i)<<abi.PageShift&(uint64(size)-1)
	}
	for f := 1; f <= abi.MaxFragment; f++ {
		span, half := 1<<f, 1<<(f-1)
		for b := 0; b < windowSlots; b += span {
			whole[b] = whole[b] && whole[b+half] && attrs(entries[b]) == attrs(entries[b+half]) &&
				slotPA(b+half) == slotPA(b)+uint64(half)<<abi.PageShift &&
				slotPA(b)%(uint64(span)<<abi.PageShift) == 0
			if whole[b] {
				for i := b; i < b+span; i++ {
					frag[i] = uint8(f)
				}
			}
		}
	}
	for i, e := range entries {
		if !e.Valid() || e.Kind() != abi.PTEPage4K && e.Kind() != abi.PTEPage64K {
			continue
		}
		f := uint(frag[i])
		if e.Kind() == abi.PTEPage64K && f < 4 {
			f = 0
		}
		if e.Fragment() != f {
			// Compare-and-swap, not a store: an entry that changed since it
			// was read above is not this function's to write back — unless
			// all that changed is the accessed bit an engine set meanwhile,
			// which must not cost the entry its new field (a field left too
			// large would let a walk span the hole this call is for).
			for pa := table + uint64(i)*8; !casPTE(mem, pa, e, e.WithFragment(f)); {
				now := loadPTE(mem, pa)
				if now&^abi.PTEAccessed != e&^abi.PTEAccessed {
					break
				}
				e = now
			}
		}
	}
}

// ANCHOR_END: refragment

// fragmentAlign returns the alignment to give physical memory of size
// bytes mapped with pages of size page, so that it can form fragments as
// large as it divides into: the largest power of two that divides size,
// at most a table's 2 MiB, at least the page. It divides size, so aligning
// to it wastes nothing.
func fragmentAlign(size uint64, page abi.PageSize) uint64 {
	rounded := (size + uint64(page) - 1) &^ (uint64(page) - 1)
	a := min(uint64(1)<<bits.TrailingZeros64(rounded), 1<<abi.LevelShift(2))
	return max(a, uint64(page))
}

// vaAlign returns the alignment to give the VA of a mapping of size bytes
// of physical memory at pa with pages of size page: as much of pa's own
// alignment as the mapping's fragments can use, so that VA and PA agree
// modulo every block size it can form. Like fragmentAlign, it divides
// size, so no VA is spent on rounding.
func vaAlign(pa, size uint64, page abi.PageSize) uint64 {
	a := fragmentAlign(size, page)
	if pa != 0 {
		a = min(a, pa&-pa)
	}
	return max(a, uint64(page))
}
