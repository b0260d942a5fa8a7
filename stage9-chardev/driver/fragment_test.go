package driver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The fragment fields the driver writes (fragment.go), and what the
// engines do with them.

// fragmentLayout maps 1 MiB of 4 KiB pages in a fresh context at a 1 MiB
// aligned VA onto 1 MiB aligned device memory, as three mappings side by
// side — [0, 512 KiB), one page, and the rest — and returns the driver,
// the context, the VA, the PA and the three mappings' pages. Mapping the
// middle page is left to the caller when skipMiddle is set.
func fragmentLayout(t *testing.T, skipMiddle bool) (*Driver, *Context, uint64, uint64, [3][]pageRun) {
	t.Helper()
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	c := newContext(t, d)
	pa, err := d.alloc.AllocAligned(1<<20, 1<<20)
	require.NoError(t, err)
	t.Cleanup(func() { d.alloc.Free(pa) })
	const va = uint64(1) << 40 // far from what the context's allocator hands out
	var runs [3][]pageRun
	pieces := [3]struct{ off, size uint64 }{{0, 512 << 10}, {512 << 10, 4 << 10}, {516 << 10, 508 << 10}}
	for i, p := range pieces {
		if i == 1 && skipMiddle {
			continue
		}
		if runs[i], err = d.mapRange(c.root, va+p.off, pa+p.off, p.size, abi.Page4K, true, false, &c.tables); err != nil {
			t.Fatal(err)
		}
	}
	return d, c, va, pa, runs
}

// fragmentsOf returns the fragment field of each of the 256 entries that
// map [va, va+1 MiB) under root (-1 for an invalid entry).
func fragmentsOf(d *Driver, root, va uint64) []int {
	table, _ := d.leafTable(root, va)
	out := make([]int, 256)
	for i := range out {
		e := loadPTE(d.vm.pool.mem, table+abi.LevelIndex(va+uint64(i)<<abi.PageShift, abi.LeafLevel)*8)
		out[i] = -1
		if e.Valid() {
			out[i] = int(e.Fragment())
		}
	}
	return out
}

// TestFragmentsSpanMappings: three mappings that continue one another in
// VA and physically form one 1 MiB block, and every entry of it says so.
func TestFragmentsSpanMappings(t *testing.T) {
	d, c, va, _, _ := fragmentLayout(t, false)
	for i, f := range fragmentsOf(d, c.root, va) {
		require.Equal(t, 8, f, "entry %d of the 1 MiB block: fragment %d; want 8 (2^(12+8) bytes)", i, f)
	}
}

// TestAFragmentStopsAtAHole: with the middle page never mapped, no
// fragment spans the hole, so a COPY reading the whole megabyte moves the
// first 512 KiB and faults at the hole's VA — even though the engine has
// just cached the block before it.
func TestAFragmentStopsAtAHole(t *testing.T) {
	d, c, va, pa, _ := fragmentLayout(t, true)
	fr := fragmentsOf(d, c.root, va)
	if fr[0] != 7 || fr[127] != 7 || fr[128] != -1 || fr[129] != 0 {
		t.Errorf("fragments around the hole: %v ... %v; want 7 up to it, none at it, 0 after it", fr[:2], fr[126:131])
	}
	dst, err := c.Alloc(1<<20, abi.Page4K)
	require.NoError(t, err)
	mem := d.hw.Memory()
	for i := range uint64(1 << 20) {
		mem[pa+i] = byte(i * 7)
	}
	err = in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: va, Dst: dst, Size: 1 << 20})
	require.ErrorIs(t, err, abi.StatusOutOfRange, "COPY across the hole")
	var fe *FaultError
	if !errors.As(c.Err(), &fe) || fe.VA != va+512<<10 || fe.Fault&0xff != abi.FaultUnmapped {
		t.Fatalf("context fault = %v; want unmapped at %#x, the hole", c.Err(), va+512<<10)
	}
	assert.Equal(t, mem[pa:pa+512<<10], readPA(d, paOf(t, c, dst), 512<<10), "the 512 KiB before the hole were not copied")
}

// TestUnmapSplitsAFragment: unmapping the middle page of a 1 MiB block
// shrinks the fields of the pages around it, and the invalidation drops
// the engine's entry for the whole block. Both halves are checked: after
// the unmap, a FILL at the page faults with the block's entry in the TLB
// (it was cached just before), and again after a fresh walk of its
// neighbour (whose field, had it not shrunk, would bring the block back).
func TestUnmapSplitsAFragment(t *testing.T) {
	d, c, va, _, runs := fragmentLayout(t, false)
	middle := va + 512<<10
	fill := func(at uint64) error {
		return in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: at, Size: 8, Value: 0x5a})
	}
	if err := fill(va); err != nil { // the copy engine caches the 1 MiB block
		t.Fatal(err)
	}
	d.unmapRange(c.root, runs[1])
	d.invalidate(c.id, middle, 4<<10) // as Context.unmap does
	fr := fragmentsOf(d, c.root, va)
	if fr[0] != 7 || fr[127] != 7 || fr[128] != -1 || fr[129] != 0 || fr[255] != 6 {
		t.Errorf("fragments after the unmap: %v ... %v ... %v; want 7 up to the hole, 0 after it, growing to 6 at the end",
			fr[:2], fr[126:131], fr[252:])
	}
	require.ErrorIs(t, fill(middle), abi.StatusOutOfRange, "FILL at the unmapped page, block cached before the unmap")
	c.ClearFault()
	for _, neighbour := range []uint64{middle - 8, middle + 4<<10} {
		d.invalidate(c.id, 0, 0) // a fresh walk of the neighbour
		require.NoError(t, fill(neighbour), "FILL at %#x, beside the unmapped page", neighbour)
		require.ErrorIs(t, fill(middle), abi.StatusOutOfRange, "FILL at the unmapped page after a walk of %#x", neighbour)
		c.ClearFault()
	}
}
