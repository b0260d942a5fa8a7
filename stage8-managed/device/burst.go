package device

import (
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/trace"
)

// A fault burst: a faulting command behaves like the many warps of a real
// GPU, not like one thread. A GPU runs a command's accesses in parallel, so
// by the time the first fault stops a channel, its other warps have
// faulted too, on every page of the range they were working through, and
// several warps on each page. So here: when a translation of an operand
// ends at a managed page that is not resident, the engine looks ahead
// RegFaultBurst bytes of the operand's range (from the faulting address,
// in access order), and records a fault for every non-resident page there
// — one record per FaultWarpBytes piece of the page that the range covers,
// the duplicates several warps make — and then stalls once. The records go
// in waves, as warps issue: every page's first piece in address order,
// then every page's second, and so on; when the ring fills, the rest are
// dropped and counted in RegFaultOverflow, which loses duplicates first.
// A dropped page is not lost: the replay resumes the command, and it
// faults on the page again.
//
// The look-ahead stops at the first entry that is neither valid nor a
// managed page (the command will fail there for good) and at a malformed
// table; it skips resident pages. It reads the leaf entries as the walk
// does (one atomic load each) and fills no TLB entry: the warps that
// faulted have not translated anything.
//
// The driver's fault handler (driver/faults.go) is what this is for: a
// batch of many records, in which sorting, de-duplication and coalescing
// into 2 MiB blocks have something to do.

// burstFault is translate's fault path: a burst of records for a managed
// page not resident, if the driver asked for bursts and the channel can
// stall, and pageFault's single record or failure otherwise.
func (e *Engine) burstFault(va, rest uint64, f abi.Fault, acc access) abi.Status {
	window := e.regs.Load(abi.RegFaultBurst)
	if f != abi.FaultNotResident || e.cur.state == 0 || window == 0 {
		return e.pageFault(va, f, acc)
	}
	pages := e.burstPages(va, min(rest, window, abi.MaxFaultBurst))
	if len(pages) == 0 || !e.dev.recordBurst(e, va, min(rest, window, abi.MaxFaultBurst), pages, acc) {
		return e.pageFault(va, f, acc)
	}
	return stalled
}

// burstPages returns the VAs of the non-resident managed pages of
// [va, va+n), in address order. The first is va's page: the caller found
// it not resident.
func (e *Engine) burstPages(va, n uint64) []uint64 {
	pages := e.burst[:0]
	leaf, leafOf := uint64(0), ^uint64(0) // the level-3 table, and the 2 MiB it covers
	for page := va &^ (1<<abi.PageShift - 1); page < va+n; page += 1 << abi.PageShift {
		if region := page >> abi.LevelShift(2); region != leafOf {
			t, ok := e.leafTable(page)
			if !ok {
				break
			}
			leaf, leafOf = t, region
		}
		pte := loadPTE(e.dev.mem, leaf+abi.LevelIndex(page, abi.LeafLevel)*8) // pairs with the driver's atomic store
		if pte.NotResident() {
			pages = append(pages, page)
		} else if !pte.Valid() {
			break // unmapped: the command fails here, after the pages before it
		}
	}
	e.burst = pages
	return pages
}

// leafTable returns the level-3 table that maps va in the current context,
// with the walk's checks on every table on the way; false if there is none
// (va is unmapped above level 3, or mapped by a larger page).
func (e *Engine) leafTable(va uint64) (uint64, bool) {
	mem := e.dev.mem
	table := e.mmu.root
	if va>>abi.VABits != 0 || table == 0 {
		return 0, false
	}
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		slots := uint64(abi.TableSlots)
		if level == abi.RootLevel {
			slots = abi.RootSlots
		}
		if table%(1<<abi.PageShift) != 0 || table > uint64(len(mem)) || slots*8 > uint64(len(mem))-table {
			return 0, false
		}
		pte := loadPTE(mem, table+abi.LevelIndex(va, level)*8)
		if !pte.Valid() || pte.Reserved() || pte.Kind() != abi.PTETable || pte.Host() {
			return 0, false
		}
		table = pte.Frame()
	}
	if table%(1<<abi.PageShift) != 0 || table > uint64(len(mem)) || abi.TableBytes > uint64(len(mem))-table {
		return 0, false
	}
	return table, true
}

// faultRing returns the fault buffer's base and size, and false if the
// registers do not describe a ring in device memory (they are input: a bad
// ring is no ring). The caller holds faultMu.
func (d *Device) faultRing() (base, size uint64, ok bool) {
	base, size = d.regs.Load(abi.RegFaultBufBase), d.regs.Load(abi.RegFaultBufSize)
	mem := uint64(len(d.mem))
	if base == 0 || size == 0 || size > abi.MaxFaultBuf || size&(size-1) != 0 ||
		base%abi.FaultRecordSize != 0 || base > mem || size*abi.FaultRecordSize > mem-base {
		return 0, 0, false
	}
	return base, size, true
}

// ANCHOR: burst

// recordBurst writes the records of a burst over pages, the non-resident
// pages of the operand's [va, va+n): in waves of one record per page, each
// wave one more FaultWarpBytes piece of each page the range covers. It
// publishes them with one store of RegFaultPut and raises one interrupt,
// and reports false if there is no usable fault buffer.
func (d *Device) recordBurst(e *Engine, va, n uint64, pages []uint64, acc access) bool {
	d.faultMu.Lock()
	regs := d.regs
	base, size, ok := d.faultRing()
	if !ok {
		d.faultMu.Unlock()
		return false
	}
	// Before any record, and before RegFaultPut: a driver that reads a
	// record of this burst (or counts it dropped) and then replays sees
	// the engine stalled, and wakes it if it sleeps (abi/managed.go).
	regs.Store(e.statusPage+abi.RegStalled, 1)
	put := regs.Load(abi.RegFaultPut)
	get := regs.Load(abi.RegFaultGet) // pairs with the driver's store after it read the records below get
	now := d.clock.Now()
	written, dropped := uint64(0), uint64(0)
	for wave := uint64(0); ; wave++ {
		more := false
		for _, page := range pages {
			// The wave-th piece of the page inside [va, va+n), if any.
			lo, hi := max(page, va&^(abi.FaultWarpBytes-1)), min(page+1<<abi.PageShift, va+n)
			at := lo + wave*abi.FaultWarpBytes
			if at >= hi {
				continue
			}
			more = true
			if put+written-get >= size { // full — or a get the driver should never have stored
				dropped++
				continue
			}
			slot := base + (put+written)%size*abi.FaultRecordSize
			abi.FaultRecord{VA: max(at, va), Timestamp: now, Channel: e.cur.id, Context: e.mmu.ctx,
				Engine: e.id, Write: acc == writing}.Encode(d.mem[slot:])
			written++
		}
		if !more {
			break
		}
	}
	if dropped > 0 {
		regs.Store(abi.RegFaultOverflow, regs.Load(abi.RegFaultOverflow)+dropped)
	}
	// Stored after the records: a driver that loads this count reads
	// every one of them whole.
	regs.Store(abi.RegFaultPut, put+written)
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindStall, Start: now, Engine: e.id, Channel: e.cur.id,
			Seq: va, Arg: dropped, Size: written})
	}
	// The load comes after the store of RegFaultPut: a handler that is
	// polling sees the records, one that is about to block sees them on
	// its last look, or has stored 1 here first (abi/managed.go).
	irq := regs.Load(abi.RegFaultNeedIrq) != 0
	d.faultMu.Unlock()
	// Raised after faultMu is let go: raise lends this thread to the
	// handler (fence.go), and another engine's burst may be waiting for
	// the lock meanwhile.
	if irq {
		d.raise(abi.IrqCauseFault)
	}
	return true
}

// ANCHOR_END: burst
