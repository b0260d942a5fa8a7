package device

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
)

// The walkers' tests: what a TLB entry filled from a fragment covers, and
// the fragments the walk refuses.

// TestAFragmentIsOneTLBEntry: a 4 KiB leaf whose fragment says it lies in
// a 64 KiB block fills one TLB entry for the block. The other 15 slots of
// the block are left empty on purpose, so the only way a FILL at one of
// their VAs can succeed is through that entry: under WalkerFragment it
// lands at the block's offset; WalkerScan and WalkerNone ignore the field
// and fault there.
func TestAFragmentIsOneTLBEntry(t *testing.T) {
	const va, frame = uint64(1) << 40, uint64(0x10000)
	for _, w := range []Walker{WalkerFragment, WalkerScan, WalkerNone} {
		t.Run(w.String(), func(t *testing.T) {
			d := openTest(t, Config{Walker: w})
			tb, root := userTables(t, d)
			tb.mapPage(t, root, va, frame, abi.Page4K, true, false)
			pe := leafOf(tb, root, va)
			tb.write(pe, tb.read(pe).WithFragment(4))
			mem := data(d)
			clear(mem)
			require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va, Size: 8, Value: 1}), "FILL at the block's first page")
			st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va + 0x3008, Size: 8, Value: 2})
			want := abi.StatusOutOfRange
			if w == WalkerFragment {
				want = abi.StatusOK
			}
			require.Equal(t, want, st, "FILL at an empty slot of the block")
			if w == WalkerFragment && !bytes.Equal(mem[frame+0x3008:frame+0x3010], bytes.Repeat([]byte{2}, 8)) {
				t.Errorf("the FILL through the block's entry did not land at frame+0x3008")
			}
		})
	}
}

// TestMalformedFragments: a fragment the walk cannot take as a block is a
// malformed entry — the command faults at its VA with FaultMalformed and
// nothing is written, nothing read beyond the entry. Each case would be
// accepted, and the FILL would land somewhere, if its check in
// fragmentBlock (or walk, for entries that may not carry a fragment) were
// removed: the frames are chosen so that every other check passes.
func TestMalformedFragments(t *testing.T) {
	const va = uint64(1) << 40
	const memSize = 8 << 20 // a 4 MiB block at frame 0 fits; one at 8 MiB does not
	tests := []struct {
		name    string
		corrupt func(tb *tables, root uint64)
	}{
		{"larger than its table", func(tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(0, abi.PTEPage4K, true, false).WithFragment(abi.MaxFragment+1))
		}},
		{"misaligned", func(tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(0x2000, abi.PTEPage4K, true, false).WithFragment(4))
		}},
		{"past device memory", func(tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(memSize, abi.PTEPage4K, true, false).WithFragment(abi.MaxFragment))
		}},
		{"past the bus range", func(tb *tables, root uint64) {
			tb.write(leafOf(tb, root, va), abi.MakePage(abi.BusBase+abi.BusSize, abi.PTEPage4K, true, true).WithFragment(abi.MaxFragment))
		}},
		{"smaller than its 64 KiB page", func(tb *tables, root uint64) {
			e := abi.MakePage(0x10000, abi.PTEPage64K, true, false).WithFragment(2)
			for i := range uint64(16) {
				tb.write(leafOf(tb, root, va+i<<abi.PageShift), e)
			}
		}},
		{"in a table entry", func(tb *tables, root uint64) {
			pe := pteAt(root, va, 0)
			tb.write(pe, tb.read(pe).WithFragment(1))
		}},
		{"on a 2 MiB page", func(tb *tables, root uint64) {
			l1 := tb.read(pteAt(root, va, 0)).Frame()
			l2 := tb.read(pteAt(l1, va, 1)).Frame()
			tb.write(pteAt(l2, va, 2), abi.MakePage(0, abi.PTEPage2M, true, false).WithFragment(1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{MemorySize: memSize})
			tb, root := userTables(t, d)
			tb.mapPage(t, root, va, 0x2000, abi.Page4K, true, false)
			tt.corrupt(tb, root)
			mem := data(d)
			pattern(mem)
			want := bytes.Clone(mem)
			st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Ctx: testCtx, Dst: va + 8, Size: 8, Value: 0xff})
			require.Equal(t, abi.StatusBadEntry, st, "FILL through a fragment %s", tt.name)
			if n, fva, f := faultOf(d); n != 1 || fva != va+8 || f != abi.FaultMalformed|abi.FaultWrite {
				t.Errorf("fault registers: %d faults, VA %#x, %v; want 1, %#x, %v", n, fva, f, va+8, abi.FaultMalformed|abi.FaultWrite)
			}
			assert.Equal(t, want, mem, "a command that faulted changed memory")
		})
	}
}
