package driver

import (
	"fmt"

	"softgpu/stage9-chardev/abi"
)

// Page tables: how the driver writes a context's tables in device memory
// (the format is in abi/vm.go; the walk that reads them is device/mmu.go).
//
// Tables come from the page-table pool, the top of device memory, which no
// context maps: no command can reach a table. The driver writes entries
// with atomic 64-bit stores, and builds a path from the root down before it
// links it in: a new table is zeroed (every entry invalid) while nothing
// points to it, and the store of the entry that points to it is the one
// that makes it reachable — so a walk sees either no table or a whole one.
//
// Changing or clearing a valid entry is different: an engine may hold the
// old translation in its TLB. The caller must invalidate (vm.go) before it
// reuses what the old entry mapped. So with a table: an unmap that leaves
// a table with no valid entry unlinks it (unlinkEmptyTables), and the
// table goes back to the pool only after the invalidation that follows —
// until then an engine's walk may be reading it. A page is never stored
// over a table entry: that would leak the table, and its memory with it.
//
// Invariants, under the context's mu:
//   - every table reachable from a context's root lies in the pool and was
//     zeroed before it was linked;
//   - a leaf maps a page-aligned PA with the context's chosen size, and a
//     64 KiB page's entry is in all 16 of its level-3 slots.
//   - a context's tables field is the pages (abi.PageShift) of the tables
//     reachable from its root, the root's included: a table is counted
//     when it is linked in and uncounted when it is unlinked.

// tablePool hands out page tables from the top of device memory.
type tablePool struct {
	alloc *Allocator // [dataSize, memSize)
	mem   []byte     // all of device memory (the driver's view)
}

// table returns the PA of a fresh table of n bytes, every entry invalid.
func (p *tablePool) table(n uint64) (uint64, error) {
	pa, err := p.alloc.AllocAligned(n, 1<<abi.PageShift)
	if err != nil {
		return 0, fmt.Errorf("softgpu: out of page-table memory: %w", err)
	}
	clear(p.mem[pa : pa+n]) // nothing points here yet: plain stores suffice
	return pa, nil
}

// free gives a table back.
func (p *tablePool) free(pa uint64) { p.alloc.Free(pa) }

// freeTables gives back tables unlinkEmptyTables unlinked, once no engine
// can be walking them: after an invalidation that followed the unlinking.
func (p *tablePool) freeTables(tables []uint64) {
	for _, pa := range tables {
		p.free(pa)
	}
}

// pageKinds is the entry kind of each page size, and the level its leaf
// lives at.
var pageKinds = map[abi.PageSize]struct {
	kind  uint64
	level int
}{
	abi.Page4K: {abi.PTEPage4K, 3}, abi.Page64K: {abi.PTEPage64K, 3},
	abi.Page2M: {abi.PTEPage2M, 2}, abi.Page1G: {abi.PTEPage1G, 1},
}

// ANCHOR: mappage

// mapPage makes va map the page at pa, of the given size, in the tables
// under root, making the tables on the way down and adding the pages they
// take to *tables (Context.tables). It fails if a table would have to go
// where a page is mapped (the caller never maps over a live mapping) or
// the pool is empty.
func (d *Driver) mapPage(root, va, pa uint64, size abi.PageSize, writable, host bool, tables *uint64) error {
	leaf := pageKinds[size]
	table := root
	for level := abi.RootLevel; level < leaf.level; level++ {
		at := table + abi.LevelIndex(va, level)*8
		e := loadPTE(d.vm.pool.mem, at)
		switch {
		case !e.Valid():
			next, err := d.vm.pool.table(abi.TableBytes)
			if err != nil {
				return err
			}
			*tables += tablePages(abi.TableBytes)
			// This store links the zeroed table in: an engine's walk that
			// loads it finds the table whole (its entries all invalid).
			storePTE(d.vm.pool.mem, at, abi.MakeTable(next))
			table = next
		case e.Kind() == abi.PTETable:
			table = e.Frame()
		default:
			return fmt.Errorf("driver: invariant broken: a page is mapped over va %#x at level %d", va, level)
		}
	}
	if at := table + abi.LevelIndex(va, leaf.level)*8; leaf.level < abi.LeafLevel && loadPTE(d.vm.pool.mem, at).Valid() {
		return fmt.Errorf("driver: invariant broken: a %d-byte page would overwrite the entry for va %#x at level %d", uint64(size), va, leaf.level)
	}
	e := abi.MakePage(pa, leaf.kind, writable, host)
	if size == abi.Page64K {
		for i := range uint64(16) { // every slot of the 64 KiB run holds the entry
			storePTE(d.vm.pool.mem, table+abi.LevelIndex(va+i<<abi.PageShift, leaf.level)*8, e)
		}
		return nil
	}
	storePTE(d.vm.pool.mem, table+abi.LevelIndex(va, leaf.level)*8, e)
	return nil
}

// ANCHOR_END: mappage

// leafEntry returns the PA of the level-3 entry for the 4 KiB page at va in
// the tables under root, making the tables on the way down and counting
// them in *tables, as mapPage does; the caller stores the entry
// (managed.go).
func (d *Driver) leafEntry(root, va uint64, tables *uint64) (uint64, error) {
	table := root
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		at := table + abi.LevelIndex(va, level)*8
		e := loadPTE(d.vm.pool.mem, at)
		switch {
		case !e.Valid():
			next, err := d.vm.pool.table(abi.TableBytes)
			if err != nil {
				return 0, err
			}
			*tables += tablePages(abi.TableBytes)
			storePTE(d.vm.pool.mem, at, abi.MakeTable(next)) // links the zeroed table in, as mapPage does
			table = next
		case e.Kind() == abi.PTETable:
			table = e.Frame()
		default:
			return 0, fmt.Errorf("driver: invariant broken: a page is mapped over va %#x at level %d", va, level)
		}
	}
	return table + abi.LevelIndex(va, abi.LeafLevel)*8, nil
}

// unmapPage clears the entry (or 16 entries) that maps the page of the
// given size at va. The tables stay; unlinkEmptyTables takes the ones left
// empty.
func (d *Driver) unmapPage(root, va uint64, size abi.PageSize) {
	leaf := pageKinds[size]
	table := root
	for level := abi.RootLevel; level < leaf.level; level++ {
		e := loadPTE(d.vm.pool.mem, table+abi.LevelIndex(va, level)*8)
		if !e.Valid() || e.Kind() != abi.PTETable {
			return // nothing mapped here
		}
		table = e.Frame()
	}
	n := uint64(1)
	if size == abi.Page64K {
		n = 16
	}
	for i := range n {
		storePTE(d.vm.pool.mem, table+abi.LevelIndex(va+i<<abi.PageShift, leaf.level)*8, 0)
	}
}

// mapRange maps [va, va+size) to [pa, pa+size) with the largest pages, up
// to maxPage, that the alignment of va, pa and what is left allow — as real
// drivers do — and returns the pages it used, for unmapRange. The small
// pages' fragment fields are written once all of them are (fragment.go).
// The tables it makes are counted in *tables, and stay on an error.
func (d *Driver) mapRange(root, va, pa, size uint64, maxPage abi.PageSize, writable, host bool, tables *uint64) ([]pageRun, error) {
	d.vm.tableMu.Lock()
	defer d.vm.tableMu.Unlock()
	defer d.refragmentLocked(root, va, size)
	var runs []pageRun
	for done := uint64(0); done < size; {
		page := abi.Page4K
		for _, p := range []abi.PageSize{abi.Page1G, abi.Page2M, abi.Page64K} {
			ps := uint64(p)
			if p <= maxPage && (va+done)%ps == 0 && (pa+done)%ps == 0 && size-done >= ps {
				page = p
				break
			}
		}
		if err := d.mapPage(root, va+done, pa+done, page, writable, host, tables); err != nil {
			d.unmapRangeLocked(root, runs)
			return nil, err
		}
		if n := len(runs); n > 0 && runs[n-1].size == page && runs[n-1].va+runs[n-1].bytes == va+done {
			runs[n-1].bytes += uint64(page)
		} else {
			runs = append(runs, pageRun{va: va + done, bytes: uint64(page), size: page})
		}
		done += uint64(page)
	}
	return runs, nil
}

// pageRun is a stretch of VA mapped with pages of one size.
type pageRun struct {
	va, bytes uint64
	size      abi.PageSize
}

// unmapRange clears what mapRange mapped, and shrinks the fragments of
// the pages around it that formed blocks with it (fragment.go). The
// caller invalidates the range afterwards.
func (d *Driver) unmapRange(root uint64, runs []pageRun) {
	d.vm.tableMu.Lock()
	defer d.vm.tableMu.Unlock()
	d.unmapRangeLocked(root, runs)
	for _, r := range runs {
		d.refragmentLocked(root, r.va, r.bytes)
	}
}

// unmapRangeLocked is unmapRange without the fragments, under tableMu.
func (d *Driver) unmapRangeLocked(root uint64, runs []pageRun) {
	for _, r := range runs {
		for off := uint64(0); off < r.bytes; off += uint64(r.size) {
			d.unmapPage(root, r.va+off, r.size)
		}
	}
}

// freeTables gives back every table under root, and root itself (rootBytes
// long): a context being closed, whose entries no engine can use any more.
// The caller zeroes the context's count of them (Context.tables).
func (d *Driver) freeTables(table uint64, level int) {
	slots := uint64(abi.TableSlots)
	if level == abi.RootLevel {
		slots = abi.RootSlots
	}
	if level < abi.LeafLevel {
		for i := range slots {
			if e := loadPTE(d.vm.pool.mem, table+i*8); e.Valid() && e.Kind() == abi.PTETable {
				d.freeTables(e.Frame(), level+1)
			}
		}
	}
	d.vm.pool.free(table)
}

// unlinkEmptyTables clears, under root, every entry that points to a table
// an unmap of [va, va+size) has left with every entry zero — from the leaves
// up, so a table whose tables all went goes too — and returns those
// tables, taking their pages off *tables: unlinked, they are no longer
// the context's. The caller invalidates, then gives them back (tablePool.
// freeTables): a walk that loaded the entry before it was cleared may be
// reading the table until the engine's next safe point. The root stays.
// Call with the context's mu held, so no mapPage puts an entry into a
// table being unlinked.
func (d *Driver) unlinkEmptyTables(root, va, size uint64, tables *uint64) []uint64 {
	var empty []uint64
	d.unlinkEmptyBelow(root, abi.RootLevel, va, va+size, &empty)
	if n := uint64(len(empty)) * tablePages(abi.TableBytes); n > *tables {
		panic(fmt.Sprintf("driver: invariant broken: %d table pages unlinked from a context that counts %d", n, *tables))
	} else {
		*tables -= n
	}
	return empty
}

// tablePages is the pages of the pool (abi.PageShift) a table of n bytes
// takes: what Context.tables counts.
func tablePages(n uint64) uint64 { return n >> abi.PageShift }

// unlinkEmptyBelow visits the entries of the level-level table at table
// that cover [lo, hi), unlinks each table under them that is empty after
// its own visit, and reports whether table itself is empty now.
func (d *Driver) unlinkEmptyBelow(table uint64, level int, lo, hi uint64, empty *[]uint64) bool {
	mem := d.vm.pool.mem
	if level < abi.LeafLevel {
		span := uint64(1) << abi.LevelShift(level) // the VA one entry of this level covers
		for at := lo &^ (span - 1); at < hi; at += span {
			pe := table + abi.LevelIndex(at, level)*8
			e := loadPTE(mem, pe)
			if !e.Valid() || e.Kind() != abi.PTETable {
				continue
			}
			if d.unlinkEmptyBelow(e.Frame(), level+1, max(lo, at), min(hi, at+span), empty) {
				storePTE(mem, pe, 0)
				*empty = append(*empty, e.Frame())
			}
		}
	}
	slots := uint64(abi.TableSlots)
	if level == abi.RootLevel {
		slots = abi.RootSlots
	}
	for i := range slots {
		if loadPTE(mem, table+i*8) != 0 { // zero is what unmapPage leaves; any other entry is in use
			return false
		}
	}
	return true
}
