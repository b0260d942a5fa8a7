package device

import (
	"math/bits"

	"softgpu/stage5-vm/abi"
	"softgpu/stage5-vm/trace"
)

// This file is the engines' MMU: every address a command names is a
// virtual address in the address space of the command's context, and this
// is where it becomes a physical one (the layout of the tables is in
// abi/vm.go). Each engine has its own TLB, tagged by context, and walks the
// tables in device memory on a miss.
//
// Translation is by runs, not bytes: translate maps the page at the start
// of an operand's remaining range once, then extends the run over every
// following page that continues it physically, and runs.go moves the whole
// run with one memmove. What a TLB entry covers, and so what extending a
// run costs, is the walker's (walker.go): with the default, a 1 MiB copy
// through 4 KiB pages that the driver mapped as one aligned fragment is one
// walk per operand and one memmove: not a million translations, nor 256
// walks.
//
// Invalidation (the handshake, engine side; the driver's is in
// driver/vm.go):
//
//	driver (invalidate)                        engine (checkInval)
//	write RegInvalCtx, RegInvalVA, RegInvalSize
//	store gen+1 → RegInvalGen                  load RegInvalGen: moved?
//	                                             drop the entries the request names
//	                                             store gen → RegInvalAck
//	load each engine's RegInvalAck == gen,
//	  or RegEngineState == EngineIdle or EngineAsleep
//
// An engine answers only at a safe point, where it holds no translation:
// at the start of a command (enterContext), before each step of a
// command's walk over its runs (execute.go: between one run pair and the
// next, so between the runs of a long copy too), and on every poll of a
// DELAY. So a busy engine acknowledges within a run. A translation is not a safe point: a COPY
// translates its source run, then its destination run, then moves the
// bytes, and an engine that acknowledged inside the second translation
// would let Unmap return — and the source's frames be freed and handed to
// someone else — while it still held the source run it was about to read.
// Nor is one run of several of the same step: the engine holds the first.
// An idle engine — out of commands, spinning or asleep — is not asked at
// all: the driver counts it as done, and a sleeping one is never woken to
// acknowledge. That is safe because of the order on both sides: the
// engine stores RegEngineState = EngineIdle once it has run out of
// commands, and before its next command stores EngineRunning and only
// then, before any translation, loads RegInvalGen (leaveIdle, idle.go);
// the driver stores RegInvalGen, and only then loads RegEngineState. Both
// are sequentially consistent, so if the driver read EngineIdle or
// EngineAsleep, the engine's store of EngineRunning comes after the
// driver's load, hence after its store of the generation — and the
// engine's load sees it, and drops the entries before it translates
// anything. An engine that finds the generation moved by more than one
// since it last looked drops everything: it cannot know what the missed
// ones named. So does one that finds it moved at all as it leaves idle:
// the driver, done with the request that engine idled through, may be
// writing the next one's registers while the engine reads them, and the
// engine would drop the wrong range and keep the entries it was asked to
// drop.
//
// Why not let an idle engine answer as it polls, as a busy one does at its
// safe points? It could, and for as long as it was running it would answer
// within a poll. But an idle engine's thread is one of the threads the
// kernel may leave waiting: on two cores, with the host and two engines,
// the spinning idle engine is often runnable and not running, and the
// thread that unmaps, spinning for the acknowledgement, may be the one
// holding the CPU it needs. Real hardware does not make an invalidation
// wait for an idle engine either: the acknowledgement says no access with
// the old translation is in flight, and an idle engine has none.

// maxRun is the most one run moves. Between runs the engine checks for
// invalidation requests, so this bounds how long an Unmap waits for an
// engine in the middle of a long copy to one memmove of 1 MiB (52 µs at
// 20 GB/s). It is 1 MiB, not less, because Go's memmove changes strategy
// there: from 1 MiB up (runtime/memmove_amd64.s) it writes with
// non-temporal stores that bypass the cache. Runs of 256 KiB copied a
// 1 MiB buffer the host had just written half again as fast as one
// memmove, and a 16 MiB one a quarter slower, in the scratch runs made
// when maxRun was set (in no record; on 2026-12-04, on an Intel Xeon
// guest, four rounds of VMH2D/page=4KiB in turns showed the 16 MiB loss
// in three and no 1 MiB gain) — a difference that has nothing to do with translation, and
// would make the comparison with untranslated copies lie about what
// translation costs.
const maxRun = 1 << 20

// tlbEntries is the size of each engine's TLB: fully associative, replaced
// round-robin.
const tlbEntries = 32

// tlbEntry is one cached translation: a page of one context.
type tlbEntry struct {
	valid    bool
	writable bool
	host     bool
	ctx      abi.Context
	shift    uint8  // log2 of the page size
	vpn      uint64 // va >> shift
	pa       uint64 // the page's first physical byte
	leaf     uint64 // the PA of the level-3 table that held the entry (4 KiB and 64 KiB pages), else 0
}

// A tlbEntry filled from a fragment covers its whole block: shift is the
// block's, pa its first physical byte (walker.go).

// mmu is an engine's translation state. Private to the engine goroutine.
type mmu struct {
	tlb       [tlbEntries]tlbEntry
	next      int // the entry the next miss replaces
	ctx       abi.Context
	root      uint64 // the current context's root table
	invalSeen uint64 // the last RegInvalGen handled
	hits      uint64 // since the counters were last published
	misses    uint64
	walkReads uint64
}

// enterContext makes c the context the engine translates in, for the
// command about to run: it must be enabled, and if sticky, not faulted.
func (e *Engine) enterContext(c abi.Context) abi.Status {
	e.checkInval()
	if c >= abi.MaxContexts {
		return abi.StatusBadContext
	}
	regs, r := e.regs, abi.ContextRegs(c)
	flags := regs.Load(r + abi.RegCtxFlags)
	if flags&abi.CtxEnabled == 0 {
		return abi.StatusBadContext
	}
	if flags&abi.CtxSticky != 0 && regs.Load(abi.ContextStatusRegs(c)+abi.RegCtxFaults) != regs.Load(r+abi.RegCtxFaultAck) {
		return abi.StatusCtxFaulted
	}
	e.mmu.ctx, e.mmu.root = c, regs.Load(r+abi.RegCtxRoot)
	return abi.StatusOK
}

// ANCHOR: checkinval

// checkInval handles a TLB invalidation request, if the driver has made one
// since the engine last looked, and acknowledges it.
func (e *Engine) checkInval() { e.answerInval(false) }

// answerInval is checkInval; woke says the engine is leaving idle. The
// driver did not wait for an idle engine to acknowledge, so it may already
// be writing its next request into RegInvalCtx, RegInvalVA and
// RegInvalSize: those need not describe the request the generation names
// any more. An engine leaving idle, or one that has missed more than one
// request, drops everything.
func (e *Engine) answerInval(woke bool) {
	gen := e.regs.Load(abi.RegInvalGen) // pairs with the driver's store in invalidate
	if gen == e.mmu.invalSeen {
		return
	}
	if woke || gen != e.mmu.invalSeen+1 {
		e.flushTLB(func(*tlbEntry) bool { return true })
	} else {
		ctx := abi.Context(e.regs.Load(abi.RegInvalCtx))
		va, size := e.regs.Load(abi.RegInvalVA), e.regs.Load(abi.RegInvalSize)
		e.flushTLB(func(t *tlbEntry) bool {
			if t.ctx != ctx {
				return false
			}
			first, last := t.vpn<<t.shift, t.vpn<<t.shift+(1<<t.shift)-1
			return size == 0 || (first < va+size && va <= last)
		})
	}
	e.mmu.invalSeen = gen
	// This store tells the driver no entry it asked about is left; its
	// loads of RegInvalAck pair with it.
	e.regs.Store(e.statusPage+abi.RegInvalAck, gen)
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindTLBInvalidate, Start: e.dev.clock.Now(), Engine: e.id, Arg: gen})
	}
}

// ANCHOR_END: checkinval

// flushTLB drops the entries drop selects.
func (e *Engine) flushTLB(drop func(*tlbEntry) bool) {
	for i := range e.mmu.tlb {
		if t := &e.mmu.tlb[i]; t.valid && drop(t) {
			t.valid = false
		}
	}
}

// ANCHOR: lookup

// lookup returns the translation of the page holding va in the current
// context, from the TLB or by a walk, and checks that acc is allowed.
func (e *Engine) lookup(va uint64, acc access) (tlbEntry, abi.Fault) {
	m := &e.mmu
	for i := range m.tlb {
		if t := m.tlb[i]; t.valid && t.ctx == m.ctx && va>>t.shift == t.vpn {
			m.hits++
			return t, permit(t, acc)
		}
	}
	t, f := e.walk(va)
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindTLBMiss, Start: e.dev.clock.Now(), Engine: e.id, Channel: e.cur.id,
			Seq: va, Arg: uint64(f)})
	}
	if f != 0 {
		return t, f
	}
	m.tlb[m.next] = t
	m.next = (m.next + 1) % tlbEntries
	return t, permit(t, acc)
}

// ANCHOR_END: lookup

// permit checks an access against a page's entry.
func permit(t tlbEntry, acc access) abi.Fault {
	if acc == writing && !t.writable {
		return abi.FaultReadOnly | abi.FaultWrite
	}
	return 0
}

// ANCHOR: walk

// walk reads the current context's tables for va, level by level, and
// returns the leaf's translation. Every entry is input the engine checks: a
// table must be 4 KiB-aligned inside device memory, an entry's kind must be
// one its level allows, a page's frame aligned to its size, reserved bits
// zero — anything else is a malformed entry, and the walk stops there.
func (e *Engine) walk(va uint64) (tlbEntry, abi.Fault) {
	m := &e.mmu
	m.misses++
	if va>>abi.VABits != 0 {
		return tlbEntry{}, abi.FaultUnmapped // outside the address space
	}
	mem := e.dev.mem
	table := m.root
	for level := abi.RootLevel; level <= abi.LeafLevel; level++ {
		slots := uint64(abi.TableSlots)
		if level == abi.RootLevel {
			slots = abi.RootSlots
		}
		if table == 0 && level == abi.RootLevel {
			return tlbEntry{}, abi.FaultUnmapped // a context with no tables maps nothing
		}
		if table%(1<<abi.PageShift) != 0 || table > uint64(len(mem)) || slots*8 > uint64(len(mem))-table {
			return tlbEntry{}, abi.FaultMalformed
		}
		pte := loadPTE(mem, table+abi.LevelIndex(va, level)*8) // pairs with the driver's atomic store
		m.walkReads++
		switch {
		case !pte.Valid():
			return tlbEntry{}, abi.FaultUnmapped
		case pte.Reserved(), level < abi.LeafLevel && pte.Fragment() != 0:
			return tlbEntry{}, abi.FaultMalformed
		case pte.Kind() == abi.PTETable && level < abi.LeafLevel:
			if pte.Host() {
				return tlbEntry{}, abi.FaultMalformed // tables live in device memory
			}
			table = pte.Frame()
			continue
		}
		size, ok := abi.LeafSize(pte, level)
		if !ok || pte.Frame()%uint64(size) != 0 {
			return tlbEntry{}, abi.FaultMalformed
		}
		shift := uint8(bits.TrailingZeros64(uint64(size)))
		t := tlbEntry{valid: true, writable: pte.Writable(), host: pte.Host(), ctx: m.ctx,
			shift: shift, vpn: va >> shift, pa: pte.Frame()}
		if level == abi.LeafLevel {
			t.leaf = table
			if f := e.fragmentBlock(&t, pte, va); f != 0 {
				return tlbEntry{}, f
			}
		}
		return t, 0
	}
	return tlbEntry{}, abi.FaultMalformed // unreachable: level 3 holds only pages
}

// ANCHOR_END: walk

// ANCHOR: translate

// translate maps the run of [va, va+size) that starts at va: the page
// holding va, extended over every following page of the range that
// continues it physically (same aperture, next physical byte). It returns
// the run's physical address, length and aperture. A fault on the first
// page is the command's, and is recorded in its context's fault registers;
// one on a later page only ends the run — the walker will start the next
// run there and fault then.
func (e *Engine) translate(va, size uint64, acc access) (pa, n uint64, host bool, st abi.Status) {
	size = min(size, maxRun)
	t, f := e.lookup(va, acc)
	if f != 0 {
		return 0, 0, false, e.pageFault(va, f, acc)
	}
	pa = t.pa + va&(1<<t.shift-1)
	n = min(size, 1<<t.shift-va&(1<<t.shift-1))
	for n < size {
		if k := e.contiguous4K(t, va+n, size-n); k > 0 {
			n += min(size-n, k<<abi.PageShift)
			t.vpn += k
			t.pa += k << abi.PageShift
			continue
		}
		next, f := e.nextPage(t, va+n, acc)
		off := (va + n) & (1<<next.shift - 1) // 0 unless the tables' fragments overlap
		if f != 0 || next.host != t.host || next.pa+off != pa+n {
			break
		}
		n += min(size-n, 1<<next.shift-off)
		t = next
	}
	if end := uint64(len(e.dev.mem)); !t.host && pa < end {
		n = min(n, end-pa) // pages past device memory fault at their own VA, in the next run (physRunAt)
	}
	return pa, n, t.host, abi.StatusOK
}

// contiguous4K is WalkerScan's fast path for the commonest mapping, 4 KiB
// pages on consecutive frames: it counts how many of the pages from va on
// (at most size bytes' worth, and no further than the end of t's leaf table)
// continue the run t ends, so that each costs one load and one comparison.
// A page continues the run if its entry is t's entry plus 4 KiB: the same
// kind, permissions and aperture, the next frame — which is everything
// nextPage would check, in one comparison. It returns 0 when t is not a
// 4 KiB page or va is in another table, and stops at the first entry that
// differs, leaving that page to nextPage. The other walkers read no
// neighbouring entry: it returns 0.
func (e *Engine) contiguous4K(t tlbEntry, va, size uint64) uint64 {
	if e.walker != WalkerScan || t.shift != abi.PageShift || t.leaf == 0 || va>>abi.LevelShift(2) != (t.vpn<<t.shift)>>abi.LevelShift(2) {
		return 0
	}
	first := abi.LevelIndex(va, abi.LeafLevel)
	last := min(abi.TableSlots, first+(size+1<<abi.PageShift-1)>>abi.PageShift)
	want := abi.MakePage(t.pa+1<<abi.PageShift, abi.PTEPage4K, t.writable, t.host)
	k := countRun(e.dev.mem, t.leaf, first, last, want, 1<<abi.PageShift)
	e.mmu.hits += k
	return k
}

// nextPage translates the page at va, which follows the page (or block) t
// translated. Under WalkerFragment and WalkerNone it is lookup: the next
// block, or page, costs a TLB lookup and on a miss a walk, as on hardware.
// Under WalkerScan a run through small pages reads their entries straight
// from the level-3 table t came from, one after another, while va stays in
// it (a 2 MiB stretch): one load per page, no walk and no TLB entry spent on
// pages a streaming copy will not touch again. The entries are read as the
// walk reads them, with the same checks, so nothing stale or malformed gets
// through.
func (e *Engine) nextPage(t tlbEntry, va uint64, acc access) (tlbEntry, abi.Fault) {
	if e.walker != WalkerScan || t.leaf == 0 || va>>abi.LevelShift(2) != (t.vpn<<t.shift)>>abi.LevelShift(2) {
		return e.lookup(va, acc)
	}
	pte := loadPTE(e.dev.mem, t.leaf+abi.LevelIndex(va, abi.LeafLevel)*8)
	size, ok := abi.LeafSize(pte, abi.LeafLevel)
	if !pte.Valid() || pte.Reserved() || !ok || pte.Frame()%uint64(size) != 0 {
		return e.lookup(va, acc) // let the walk find, and report, what is wrong
	}
	shift := uint8(bits.TrailingZeros64(uint64(size)))
	next := tlbEntry{valid: true, writable: pte.Writable(), host: pte.Host(), ctx: t.ctx, shift: shift,
		vpn: va >> shift, pa: pte.Frame(), leaf: t.leaf}
	e.mmu.hits++
	return next, permit(next, acc)
}

// ANCHOR_END: translate

// translateBack maps the run of [end-size, end) that ends at end: the page
// holding end-1, extended backwards over every page before it that leads
// up to it physically.
func (e *Engine) translateBack(end, size uint64, acc access) (pa, n uint64, host bool, st abi.Status) {
	t, f := e.lookup(end-1, acc)
	if f != 0 {
		return 0, 0, false, e.pageFault(end-1, f, acc)
	}
	last := t.pa + (end-1)&(1<<t.shift-1) // the run's last physical byte
	n = min(size, (end-1)&(1<<t.shift-1)+1)
	for n < size {
		prev, f := e.lookup(end-n-1, acc)
		if f != 0 || prev.host != t.host || prev.pa+(end-n-1)&(1<<prev.shift-1) != last-n {
			break
		}
		n += min(size-n, (end-n-1)&(1<<prev.shift-1)+1)
	}
	return last + 1 - n, n, t.host, abi.StatusOK
}

// pageFault records a translation fault of the current context — the VA, then
// the kind, then the count, which the driver polls — and returns the
// command's status for it.
func (e *Engine) pageFault(va uint64, f abi.Fault, acc access) abi.Status {
	if acc == writing {
		f |= abi.FaultWrite
	}
	regs, s := e.regs, abi.ContextStatusRegs(e.mmu.ctx)
	regs.Store(s+abi.RegCtxFaultVA, va)
	regs.Store(s+abi.RegCtxFaultInfo, uint64(f))
	regs.Add(s+abi.RegCtxFaults, 1) // both engines may fault one context at once: an atomic add, not load and store
	e.publishTLBCounters()
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindPageFault, Start: e.dev.clock.Now(), Engine: e.id, Channel: e.cur.id,
			Seq: va, Arg: uint64(f)})
	}
	switch f &^ abi.FaultWrite {
	case abi.FaultReadOnly:
		return abi.StatusReadOnly
	case abi.FaultMalformed:
		return abi.StatusBadEntry
	}
	return abi.StatusOutOfRange
}

// publishTLBCounters adds the counts since the last call to the engine's
// TLB registers. The engine calls it when it goes idle and at a fault, not
// per translation: a store per lookup would cost more than the lookup.
func (e *Engine) publishTLBCounters() {
	m, regs := &e.mmu, e.regs
	if m.hits|m.misses|m.walkReads == 0 {
		return
	}
	regs.Store(e.statusPage+abi.RegTLBHits, regs.Load(e.statusPage+abi.RegTLBHits)+m.hits)
	regs.Store(e.statusPage+abi.RegTLBMisses, regs.Load(e.statusPage+abi.RegTLBMisses)+m.misses)
	regs.Store(e.statusPage+abi.RegTLBWalkReads, regs.Load(e.statusPage+abi.RegTLBWalkReads)+m.walkReads)
	m.hits, m.misses, m.walkReads = 0, 0, 0
}
