package device

import (
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage5-vm/abi"
)

// TestACopyAnswersAnInvalidationBetweenItsRuns: a COPY of two pages whose
// frames do not follow one another runs in two steps; an invalidation of
// the second source page requested while the first step runs is answered
// at the safe point between the steps, so the second step translates the
// page again and reads its new frame, not the stale one in the TLB.
// (Mutation S5-06: the checkInval at the top of copyRuns' loop dropped.)
func TestACopyAnswersAnInvalidationBetweenItsRuns(t *testing.T) {
	const src, dst = uint64(1) << 40, uint64(1)<<40 + 1<<30
	const aPA, oldPA, newPA, dstPA = 0x10000, 0x30000, 0x50000, 0x70000
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	tb, root := userTables(t, d)
	tb.mapPage(t, root, src, aPA, abi.Page4K, true, false)
	tb.mapPage(t, root, src+4096, oldPA, abi.Page4K, true, false)
	tb.mapPage(t, root, dst, dstPA, abi.Page4K, true, false)
	tb.mapPage(t, root, dst+4096, dstPA+4096, abi.Page4K, true, false)
	mem := data(d)
	clear(mem)
	fillBytes(mem[aPA:aPA+4096], 0x11)
	fillBytes(mem[oldPA:oldPA+4096], 0x22)
	fillBytes(mem[newPA:newPA+4096], 0x33)
	// Cache the second source page's old translation.
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Ctx: testCtx, Src: src + 4096, Dst: dst, Size: 8}), "warming COPY")
	gen := d.regs.Load(abi.RegInvalGen) + 1
	asked := false
	d.SetHooks(Hooks{Resolved: func(e abi.Engine, va uint64, write bool) {
		if va == src && !write && !asked { // the first step's source run: the driver remaps the second page
			asked = true
			tb.write(leafOf(tb, root, src+4096), abi.MakePage(newPA, abi.PTEPage4K, true, false))
			d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
			d.regs.Store(abi.RegInvalVA, src+4096)
			d.regs.Store(abi.RegInvalSize, 4096)
			d.regs.Store(abi.RegInvalGen, gen)
		}
	}})
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Ctx: testCtx, Src: src, Dst: dst, Size: 8192}), "two-page COPY")
	require.True(t, asked, "the hook never saw the first source run")
	require.Equal(t, byte(0x11), mem[dstPA], "first page")
	require.Equal(t, byte(0x33), mem[dstPA+4096], "second page: want the new frame's bytes (0x33), not the stale TLB entry's (0x22)")
	require.Equal(t, gen, d.regs.Load(abi.EngineStatusPage(abi.EngineCopy)+abi.RegInvalAck), "invalidation acknowledged between the COPY's runs")
}

// TestAnInvalidationOfPartOfABlockDropsTheBlock: a TLB entry that covers a
// 2 MiB page is dropped by an invalidation of any 4 KiB inside it, not only
// by one that covers the whole page. The request is made while a busy
// engine runs a FILL, and answered at the safe point between its runs (an
// engine leaving idle drops everything, which would hide the bug).
// (Mutation S5-03.)
func TestAnInvalidationOfPartOfABlockDropsTheBlock(t *testing.T) {
	const va = uint64(1) << 40 // a 2 MiB page here; a 4 KiB page just below it
	const smallPA, oldPA, newPA = 0x10000, 2 << 20, 4 << 20
	d := openTest(t, Config{MemorySize: 8 << 20})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va-4096, smallPA, abi.Page4K, true, false)
	tb.mapPage(t, root, va, oldPA, abi.Page2M, true, false)
	mem := data(d)
	clear(mem)
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: 1}), "warming FILL")
	table := root
	for level := abi.RootLevel; level < 2; level++ {
		table = tb.read(pteAt(table, va, level)).Frame()
	}
	tb.write(pteAt(table, va, 2), abi.MakePage(newPA, abi.PTEPage2M, true, false))
	gen := d.regs.Load(abi.RegInvalGen) + 1
	asked := false
	d.SetHooks(Hooks{Resolved: func(e abi.Engine, addr uint64, write bool) {
		if addr == va-4096 && !asked { // the FILL's first run: the driver asks for 4 KiB inside the block
			asked = true
			d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
			d.regs.Store(abi.RegInvalVA, va+4096)
			d.regs.Store(abi.RegInvalSize, 4096)
			d.regs.Store(abi.RegInvalGen, gen)
		}
	}})
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va - 4096, Size: 4096 + 8, Value: 2}), "FILL across into the block")
	require.True(t, asked, "the hook never saw the first run")
	require.Equal(t, gen, d.regs.Load(abi.EngineStatusPage(abi.EngineCopy)+abi.RegInvalAck), "acknowledged between the runs")
	if mem[newPA] != 2 || mem[oldPA] != 1 {
		t.Fatalf("after invalidating 4 KiB of a cached 2 MiB page: old frame %d, new frame %d; want the new frame written", mem[oldPA], mem[newPA])
	}
}

// TestAVAPastTheAddressSpaceFaults: a VA with a bit at or above VABits set
// is outside the address space and faults, rather than aliasing the VA
// with those bits cleared. (Mutation S5-05.)
func TestAVAPastTheAddressSpaceFaults(t *testing.T) {
	const va = uint64(1) << 40
	d := openTest(t, Config{})
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, false)
	mem := data(d)
	clear(mem)
	for _, bad := range []uint64{va | 1<<abi.VABits, va | 1<<63} {
		st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: bad, Size: 8, Value: 7})
		require.Equal(t, abi.StatusOutOfRange, st, "FILL at %#x", bad)
		require.Equal(t, byte(0), mem[0x10000], "FILL at %#x wrote the page mapped at %#x", bad, va)
	}
}

// TestARunDoesNotCrossApertures: a device page whose physical address
// happens to follow a host page's bus address numerically does not
// continue that page's run: it is another aperture. A FILL over both
// starts at the host page, whose bus address nothing is registered at, so
// it fails there — and it must not write device memory at the host page's
// number. (Mutation S5-28: translate extends a run without comparing
// apertures, and takes the last page's.)
func TestARunDoesNotCrossApertures(t *testing.T) {
	const va = uint64(1) << 40
	d := openTest(t, Config{})
	tb, root := userTables(t, d)
	tb.mapPage(t, root, va, 0x10000, abi.Page4K, true, true)       // host: bus address 0x10000, unregistered
	tb.mapPage(t, root, va+4096, 0x11000, abi.Page4K, true, false) // device memory at 0x11000
	mem := data(d)
	clear(mem)
	st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8192, Value: 0x5a})
	require.Equal(t, byte(0), mem[0x10000], "the FILL (status %v) wrote device memory at 0x10000, the host page's bus address", st)
	require.NotEqual(t, abi.StatusOK, st, "a FILL through a host page at an unregistered bus address")
}
