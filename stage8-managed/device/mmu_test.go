package device

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
)

// The MMU's tests build page tables by hand (vm_helpers_test.go) for a
// context of their own, testCtx, and run commands in it.

const testCtx abi.Context = 1

// userTables enables testCtx with an empty root table in the upper half of
// the table area (identityMap's tables for context 0 fill far less than the
// lower half), and returns the allocator and the root.
func userTables(t testing.TB, d *Device) (*tables, uint64) {
	t.Helper()
	tb := &tables{d: d, next: uint64(len(d.mem)) - tableArea/2}
	root := tb.alloc(t, abi.RootBytes)
	r := abi.ContextRegs(testCtx)
	d.regs.Store(r+abi.RegCtxRoot, root)
	d.regs.Store(r+abi.RegCtxFlags, abi.CtxEnabled)
	return tb, root
}

// faultOf reads testCtx's fault registers: how many, the last VA and kind.
func faultOf(d *Device) (n, va uint64, f abi.Fault) {
	s := abi.ContextStatusRegs(testCtx)
	return d.regs.Load(s + abi.RegCtxFaults), d.regs.Load(s + abi.RegCtxFaultVA), abi.Fault(d.regs.Load(s + abi.RegCtxFaultInfo))
}

// TestWalkEveryPageSize: a page of each size, found by a walk through as
// many levels as its size needs, translates an offset inside it to the
// same offset in its frame; a second access to the page hits the TLB.
func TestWalkEveryPageSize(t *testing.T) {
	tests := []struct {
		size   abi.PageSize
		off    uint64 // inside the page, and inside the 1 MiB the test can see
		levels uint64 // the entries a walk reads
	}{
		{abi.Page4K, 0x123, 4},
		{abi.Page64K, 0x5128, 4},
		{abi.Page2M, 0x81230, 3},
		{abi.Page1G, 0xf0008, 2},
	}
	for _, tt := range tests {
		t.Run(tt.size.String(), func(t *testing.T) {
			d := openTest(t, Config{})
			tb, root := userTables(t, d)
			va := uint64(1)<<40 + 3*uint64(tt.size)
			tb.mapPage(t, root, va, 0, tt.size, true, false) // frame 0 is aligned to every size
			mem := data(d)
			clear(mem)
			for i := range 2 {
				cmd := abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va + tt.off, Size: 8, Value: uint64(0x41 + i)}
				require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, cmd), "FILL at %#x in a %v page", va+tt.off, tt.size)
			}
			want := make([]byte, len(mem))
			copy(want[tt.off:], bytes.Repeat([]byte{0x42}, 8))
			require.Equal(t, want, mem, "FILL through a %v page: memory differs from one write of 8 bytes at %#x", tt.size, tt.off)
			hits, misses, reads := tlbCounters(t, d, abi.EngineCopy, 2, tt.levels) // two fills
			if misses != 1 || reads != tt.levels || hits < 1 {
				t.Errorf("TLB counters: %d hits, %d misses, %d walk reads; want ≥1, 1, %d", hits, misses, reads, tt.levels)
			}
		})
	}
}

// tlbCounters waits until engine e has published counters for at least
// lookups translations (hits and misses) and reads walk reads — it
// publishes them when it goes idle, so counters from an earlier idle spell
// can be there first — then returns them. RegTLBWalkReads is the last of
// the three the engine stores, so it is loaded last.
func tlbCounters(t testing.TB, d *Device, e abi.Engine, lookups, reads uint64) (hits, misses, walkReads uint64) {
	t.Helper()
	page := abi.EngineStatusPage(e)
	deadline := time.Now().Add(10 * time.Second)
	for {
		hits, misses = d.regs.Load(page+abi.RegTLBHits), d.regs.Load(page+abi.RegTLBMisses)
		walkReads = d.regs.Load(page + abi.RegTLBWalkReads)
		if hits+misses >= lookups && walkReads >= reads {
			return hits, misses, walkReads
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %v published %d lookups and %d walk reads in 10 s; want %d and %d", e, hits+misses, walkReads, lookups, reads)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestMalformedEntries: every entry a walk cannot follow fails the command
// with StatusBadEntry, records FaultMalformed at the VA, and writes nothing.
func TestMalformedEntries(t *testing.T) {
	const va = uint64(1) << 40
	tests := []struct {
		name    string
		corrupt func(t *testing.T, tb *tables, root uint64)
	}{
		{"reserved bit in the root", func(t *testing.T, tb *tables, root uint64) {
			pe := pteAt(root, va, 0)
			tb.write(pe, tb.read(pe)|1<<5)
		}},
		{"reserved bit in a leaf", func(t *testing.T, tb *tables, root uint64) {
			pe := leafOf(tb, root, va)
			tb.write(pe, tb.read(pe)|1<<5) // bit 6 is the accessed bit from this stage on (abi/managed.go)
		}},
		{"a page kind the root does not allow", func(t *testing.T, tb *tables, root uint64) {
			tb.write(pteAt(root, va, 0), abi.MakePage(0, abi.PTEPage2M, true, false))
		}},
		{"a 4 KiB page at level 2", func(t *testing.T, tb *tables, root uint64) {
			l1 := tb.read(pteAt(root, va, 0)).Frame()
			l2 := tb.read(pteAt(l1, va, 1)).Frame()
			tb.write(pteAt(l2, va, 2), abi.MakePage(0, abi.PTEPage4K, true, false))
		}},
		{"a table entry at level 3", func(t *testing.T, tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakeTable(0x1000))
		}},
		{"a 2 MiB page at level 3", func(t *testing.T, tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(0, abi.PTEPage2M, true, false))
		}},
		{"a 2 MiB page on a 4 KiB frame", func(t *testing.T, tb *tables, root uint64) {
			l1 := tb.read(pteAt(root, va, 0)).Frame()
			l2 := tb.read(pteAt(l1, va, 1)).Frame()
			tb.write(pteAt(l2, va, 2), abi.MakePage(0x1000, abi.PTEPage2M, true, false))
		}},
		{"a 64 KiB page on a 4 KiB frame", func(t *testing.T, tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(0x1000, abi.PTEPage64K, true, false))
		}},
		{"a table outside device memory", func(t *testing.T, tb *tables, root uint64) {
			tb.write(pteAt(root, va, 0), abi.MakeTable(uint64(len(tb.d.mem))))
		}},
		{"a page beyond device memory", func(t *testing.T, tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(uint64(len(tb.d.mem)), abi.PTEPage4K, true, false))
		}},
		{"a table in host memory", func(t *testing.T, tb *tables, root uint64) {
			tb.write(pteAt(root, va, 0), tb.read(pteAt(root, va, 0))|abi.PTEHost)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{})
			tb, root := userTables(t, d)
			tb.mapPage(t, root, va, 0x2000, abi.Page4K, true, false)
			tt.corrupt(t, tb, root)
			mem := data(d)
			pattern(mem)
			want := bytes.Clone(mem)
			st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va + 8, Size: 8, Value: 0xff})
			require.Equal(t, abi.StatusBadEntry, st, "FILL through %s", tt.name)
			if n, fva, f := faultOf(d); n != 1 || fva != va+8 || f != abi.FaultMalformed|abi.FaultWrite {
				t.Errorf("fault registers: %d faults, VA %#x, %v; want 1, %#x, %v", n, fva, f, va+8, abi.FaultMalformed|abi.FaultWrite)
			}
			assert.Equal(t, want, mem, "a command that faulted changed memory")
			assert.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 8, Value: 1}), "context 0 after the fault")
		})
	}
}

// leafOf returns the PA of va's level-3 entry under root (the tables on the
// way must exist).
func leafOf(tb *tables, root, va uint64) uint64 {
	table := root
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		table = tb.read(pteAt(table, va, level)).Frame()
	}
	return pteAt(table, va, abi.LeafLevel)
}

// TestRunsFollowTheEntries: translate merges consecutive pages into one run
// only when each continues the last — next frame, same permissions, same
// aperture — and a page that does not still translates on its own. The
// 4 KiB pages here are mapped so that every way of breaking a run occurs:
// a jump in frames, a frame going backwards, and a read-only page in the
// middle of frames that would otherwise continue.
func TestRunsFollowTheEntries(t *testing.T) {
	const va = uint64(1) << 40
	d := openTest(t, Config{})
	tb, root := userTables(t, d)
	frames := []uint64{0x10000, 0x11000, 0x12000, 0x20000, 0x21000, 0x08000, 0x09000, 0x0a000}
	for i, pa := range frames {
		tb.mapPage(t, root, va+uint64(i)<<12, pa, abi.Page4K, true, false)
	}
	mem := data(d)
	pattern(mem)
	want := bytes.Clone(mem)
	src := make([]byte, len(frames)<<12)
	for i := range src {
		src[i] = byte(i*13 + i>>12)
	}
	const srcPA = 0x40000 // context 0 maps it here
	copy(mem[srcPA:], src)
	copy(want[srcPA:], src)
	cmd := abi.Command{Op: abi.OpCopy, Ctx: testCtx, Src: va, Dst: va, Size: uint64(len(src))}
	// The source is context 0's; testCtx maps it at its own VA too.
	for i := range uint64(len(frames)) {
		tb.mapPage(t, root, va+1<<30+i<<12, srcPA+i<<12, abi.Page4K, false, false)
	}
	cmd.Src = va + 1<<30
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, cmd), "COPY over %d pages", len(frames))
	for i, pa := range frames {
		copy(want[pa:pa+4096], src[i<<12:])
	}
	require.Equal(t, want, mem, "COPY through scattered 4 KiB pages: memory differs from each page landing in its frame")

	// A read-only page between two writable ones, on consecutive frames: a
	// write stops at it, and the fault names its first byte.
	const ro = va + 32<<20
	for i := range uint64(3) {
		tb.mapPage(t, root, ro+i<<12, 0x60000+i<<12, abi.Page4K, i != 1, false)
	}
	st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: ro, Size: 3 << 12, Value: 0x77})
	require.Equal(t, abi.StatusReadOnly, st, "FILL across a read-only page")
	if _, fva, f := faultOf(d); fva != ro+1<<12 || f != abi.FaultReadOnly|abi.FaultWrite {
		t.Errorf("fault at %#x, %v; want %#x, %v", fva, f, ro+1<<12, abi.FaultReadOnly|abi.FaultWrite)
	}
	assert.Equal(t, want[0x61000:0x62000], mem[0x61000:0x62000], "the read-only page was written")
	assert.Equal(t, want[0x62000:0x63000], mem[0x62000:0x63000], "the page after the fault was written")
}

// staleTranslation maps va in the test context to frame 0x10000, fills 8
// bytes through it with 1 so that the copy engine's TLB holds the
// translation, then points the entry at 0x20000 without invalidating. It
// returns the data memory and a fill of va on the copy engine: a fill that
// lands in the old frame came through the TLB.
func staleTranslation(t *testing.T, d *Device, va uint64) (mem []byte, fill func(v uint64)) {
	t.Helper()
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
	mem = data(d)
	clear(mem)
	fill = func(v uint64) {
		t.Helper()
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: v}), "FILL")
	}
	fill(1) // cached now
	tb.write(leafOf(tb, root, va), abi.MakePage(0x20000, abi.PTEPage4K, true, false))
	return mem, fill
}

// TestInvalidationDropsWhatTheTLBHolds: a translation the TLB holds
// outlives a change to its entry — that is what a TLB is — until the
// driver's invalidation request names it; a busy engine acknowledges the
// request with its generation at its next safe point, dropping what the
// request names and nothing else, so a request for another context leaves
// the entry alone. (An idle engine is not asked: it drops everything if a
// request came while it idled, TestAnIdleEngineDropsWhatItIdledThrough.)
// Each request here is made from the Resolved hook while the engine is in
// the middle of a FILL of two pages on frames apart — two runs, with a safe
// point between them.
func TestInvalidationDropsWhatTheTLBHolds(t *testing.T) {
	const va = uint64(1) << 40
	const w = va + 1<<30 // the two-page FILL's destination
	d := openTest(t, Config{})
	var request func() // set by the test before a doorbell, run by the engine after it
	d.SetHooks(Hooks{Resolved: func(e abi.Engine, addr uint64, write bool) {
		if addr == w && request != nil {
			r := request
			request = nil
			r()
		}
	}})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
	tb.mapPage(t, root, w, 0x40000, abi.Page4K, true, false)
	tb.mapPage(t, root, w+4096, 0x60000, abi.Page4K, true, false)
	mem := data(d)
	clear(mem)
	fill := func(v uint64) {
		t.Helper()
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: v}), "FILL")
	}
	fill(1) // cached now
	tb.write(leafOf(tb, root, va), abi.MakePage(0x20000, abi.PTEPage4K, true, false))
	fill(2)
	if mem[0x10000] != 2 || mem[0x20000] != 0 {
		t.Fatalf("after the entry changed, without invalidation: old frame %d, new frame %d; want the TLB's frame written", mem[0x10000], mem[0x20000])
	}
	invalidate := func(ctx abi.Context, gen uint64) {
		t.Helper()
		request = func() {
			d.regs.Store(abi.RegInvalCtx, uint64(ctx))
			d.regs.Store(abi.RegInvalVA, va)
			d.regs.Store(abi.RegInvalSize, 4096)
			d.regs.Store(abi.RegInvalGen, gen)
		}
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: w, Size: 8192, Value: 0xee}), "the two-page FILL")
		require.Nil(t, request, "the FILL's first run did not reach the Resolved hook")
		require.Equal(t, gen, d.regs.Load(abi.EngineStatusPage(abi.EngineCopy)+abi.RegInvalAck), "invalidation %d acknowledged between the FILL's two runs", gen)
	}
	invalidate(0, 1) // another context's range
	fill(3)
	require.Equal(t, byte(3), mem[0x10000], "an invalidation of context 0 dropped context %d's entry", testCtx)
	invalidate(testCtx, 2)
	fill(4)
	if mem[0x20000] != 4 || mem[0x10000] != 3 {
		t.Fatalf("after invalidation: old frame %d, new frame %d; want the new frame written", mem[0x10000], mem[0x20000])
	}
}

// TestAnIdleEngineDropsWhatItIdledThrough: the driver does not wait for an
// idle engine (device/mmu.go), so a request that comes while the engine
// spins with nothing to do is not acknowledged, and the driver may be
// writing the next request's range by the time the engine reads it. Here
// the engine idles through request 1 (for the page it has cached), and its
// next command comes while request 2's range — another page — is in the
// registers: it must drop everything, not take request 1 for request 2.
func TestAnIdleEngineDropsWhatItIdledThrough(t *testing.T) {
	const va, other = uint64(1) << 40, uint64(1)<<40 + 1<<30
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	mem, fill := staleTranslation(t, d, va)
	state := abi.EngineStatusPage(abi.EngineCopy) + abi.RegEngineState
	waitFor(t, "the copy engine idle", func() bool { return d.regs.Load(state) == abi.EngineIdle })
	request := func(va uint64) {
		d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
		d.regs.Store(abi.RegInvalVA, va)
		d.regs.Store(abi.RegInvalSize, 4096)
	}
	request(va)
	d.regs.Store(abi.RegInvalGen, 1) // request 1: the driver reads EngineIdle and moves on
	request(other)                   // request 2, its generation still to come
	if ack := d.regs.Load(abi.EngineStatusPage(abi.EngineCopy) + abi.RegInvalAck); ack != 0 {
		t.Errorf("an idle engine acknowledged request %d; it is not asked", ack)
	}
	fill(2)
	if mem[0x20000] != 2 || mem[0x10000] != 1 {
		t.Fatalf("after idling through an invalidation of its entry: old frame %d, new frame %d; want the new frame written", mem[0x10000], mem[0x20000])
	}
}

// TestASleepingEngineDropsWhatItSleptThrough: the driver does not wait for
// a sleeping engine to acknowledge an invalidation, so it may be writing
// its next request into the request registers by the time the engine
// wakes and reads them. Here the engine sleeps through request 1 (for the
// page it has cached) and wakes while request 2's range — another page —
// is in the registers and its generation not yet stored: it must not take
// request 1 for request 2 and keep the stale entry.
func TestASleepingEngineDropsWhatItSleptThrough(t *testing.T) {
	const va, other = uint64(1) << 40, uint64(1)<<40 + 1<<30
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCompute, abi.IdleSleep, 0)
	mem, fill := staleTranslation(t, d, va)
	setIdle(d, abi.EngineCopy, abi.IdleSleep, 0)
	waitAsleep(t, d, abi.EngineCopy, abi.EngineCompute)
	request := func(va uint64) {
		d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
		d.regs.Store(abi.RegInvalVA, va)
		d.regs.Store(abi.RegInvalSize, 4096)
	}
	request(va)
	d.regs.Store(abi.RegInvalGen, 1) // request 1: the driver sees the engine asleep and moves on
	request(other)                   // request 2, its generation still to come
	fill(2)                          // wakes the engine
	if mem[0x20000] != 2 || mem[0x10000] != 1 {
		t.Fatalf("after sleeping through an invalidation of its entry: old frame %d, new frame %d; want the new frame written", mem[0x10000], mem[0x20000])
	}
}

// TestStickyContextStopsAtItsFault: a sticky context fails every command
// after its first fault with StatusCtxFaulted, without translating, until
// the driver acknowledges the faults — on every engine, not only the one
// that faulted: nothing the driver stores announces a fault, so an engine
// that kept what it read of the context from one command to the next would
// miss the other engine's. A context that is not enabled, or out of range,
// is StatusBadContext.
func TestStickyContextStopsAtItsFault(t *testing.T) {
	const va = uint64(1) << 40
	for _, faulting := range []abi.Engine{abi.EngineCopy, abi.EngineCompute} {
		t.Run("fault on the "+faulting.String()+" engine", func(t *testing.T) {
			d := openTest(t, Config{})
			tb, root := userTables(t, d)
			tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
			r := abi.ContextRegs(testCtx)
			d.regs.Store(r+abi.RegCtxFlags, abi.CtxEnabled|abi.CtxSticky)
			good := abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: 9}
			require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, good), "FILL in a healthy sticky context")
			bad := abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va + 4096, Size: 4} // unmapped; FILL runs on both engines
			require.Equal(t, abi.StatusOutOfRange, run(t, d, faulting, bad), "FILL at an unmapped VA")
			mem := data(d)
			mem[0x10000] = 0
			if st := run(t, d, abi.EngineCopy, good); st != abi.StatusCtxFaulted || mem[0x10000] != 0 {
				t.Fatalf("FILL after the fault = %v, wrote %d; want %v and nothing written", st, mem[0x10000], abi.StatusCtxFaulted)
			}
			n, _, _ := faultOf(d)
			d.regs.Store(r+abi.RegCtxFaultAck, n)
			if st := run(t, d, abi.EngineCopy, good); st != abi.StatusOK || mem[0x10000] != 9 {
				t.Fatalf("FILL after the driver cleared the fault = %v, wrote %d", st, mem[0x10000])
			}
			for _, ctx := range []abi.Context{2, abi.MaxContexts, 0xffff} {
				cmd := good
				cmd.Ctx = ctx
				assert.Equal(t, abi.StatusBadContext, run(t, d, abi.EngineCopy, cmd), "FILL in context %d", ctx)
			}
		})
	}
}

// TestAContextMadeAgainIsReadAgain: what the driver does to a context's
// registers when it closes the context and makes another with the same id
// — flags off, then an invalidation; a new root, flags on, an invalidation
// of the old tables' entries — reaches the engine that ran the old one at
// its next command: refused while the context is off, and translated
// through the new root after, not the old.
func TestAContextMadeAgainIsReadAgain(t *testing.T) {
	const va = uint64(1) << 40
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
	mem := data(d)
	clear(mem)
	fill := abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: 1}
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, fill), "FILL in the context")
	require.Equal(t, byte(1), mem[0x10000])

	invalidate := func() { // the whole of testCtx, as closing a context asks
		d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
		d.regs.Store(abi.RegInvalVA, 0)
		d.regs.Store(abi.RegInvalSize, 0)
		d.regs.Store(abi.RegInvalGen, d.regs.Load(abi.RegInvalGen)+1)
	}
	r := abi.ContextRegs(testCtx)
	d.regs.Store(r+abi.RegCtxFlags, 0)
	invalidate()
	fill.Value = 2
	require.Equal(t, abi.StatusBadContext, run(t, d, abi.EngineCopy, fill), "FILL in the context after it was disabled")
	require.Equal(t, byte(1), mem[0x10000], "a FILL in a disabled context wrote")

	root2 := tb.alloc(t, abi.RootBytes)
	tb.mapPage(t, root2, va, 0x20000, abi.Page4K, true, false)
	d.regs.Store(r+abi.RegCtxRoot, root2)
	d.regs.Store(r+abi.RegCtxFlags, abi.CtxEnabled)
	invalidate()
	fill.Value = 3
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, fill), "FILL in the context made again")
	if mem[0x20000] != 3 || mem[0x10000] != 1 {
		t.Fatalf("after the context was made again with a new root: old frame %d, new frame %d; want the new frame written", mem[0x10000], mem[0x20000])
	}
}
