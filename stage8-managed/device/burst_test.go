package device

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
)

// The tests of fault bursts (burst.go), playing the driver by hand as
// fault_test.go does.

// burstLayout is the tests' operand: a FILL of [burstVA, burstVA+burstLen)
// over nine pages, the first and last partly, with page 3 resident.
const (
	burstBase = 0x40000
	burstVA   = burstBase + 512
	burstLen  = 8 << abi.PageShift
)

// burstWant is what a whole burst over the operand records: page by page
// in address order (page 3 is resident), then the duplicates in waves.
// Page 0 is covered from byte 512 (its 1 KiB pieces at 0, 1, 2 and 3 KiB,
// the first recorded at the faulting address), page 8 up to byte 512 (one
// piece).
func burstWant() []uint64 {
	pages := []uint64{0, 1, 2, 4, 5, 6, 7, 8}
	var vas []uint64
	for wave := uint64(0); wave < 4; wave++ {
		for _, p := range pages {
			if p == 8 && wave > 0 {
				continue
			}
			va := burstBase + p<<abi.PageShift + wave*abi.FaultWarpBytes
			if p == 0 && wave == 0 {
				va = burstVA
			}
			vas = append(vas, va)
		}
	}
	return vas
}

// setupBurst opens a device with a fault buffer of records and bursts of
// window bytes, on channel 5 of the copy engine, and makes the operand's
// pages managed, page 3 excepted.
func setupBurst(t *testing.T, records, window uint64) *Device {
	d := openTest(t, Config{})
	const e = abi.EngineCopy
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, 5, 1, 0)}), "runlist")
	setFaultBuffer(d, records)
	d.regs.Store(abi.RegFaultBurst, window)
	for p := uint64(0); p <= 8; p++ {
		if p != 3 {
			setManaged(t, d, burstBase+p<<abi.PageShift)
		}
	}
	return d
}

// TestAFaultBurstRecordsEveryPageOfTheWindow: one FILL that faults writes
// a record for every non-resident page of its range, in address order,
// then each page's duplicates, stalls once, and after one replay with
// every page mapped finishes with every byte written.
func TestAFaultBurstRecordsEveryPageOfTheWindow(t *testing.T) {
	d := setupBurst(t, 64, 2<<20)
	want := burstWant()
	put0 := d.regs.Load(abi.RegFaultPut)
	i := publish(d, 5, abi.Command{Op: abi.OpFill, Dst: burstVA, Size: burstLen, Value: 0x5a})
	waitFor(t, "the burst's records", func() bool { return d.regs.Load(abi.RegFaultPut) == put0+uint64(len(want)) })
	waitFor(t, "the channel stalled", func() bool { return stateFlags(d, 5) == abi.StateSaved|abi.StateFaulted })
	for k, va := range want {
		if r := record(t, d, put0+uint64(k), 64); r.VA != va || r.Channel != 5 || !r.Write || r.Engine != abi.EngineCopy {
			t.Errorf("record %d = %+v; want VA %#x, channel 5, a write on the copy engine", k, r, va)
		}
	}
	assert.Equal(t, uint64(0), d.regs.Load(abi.RegFaultOverflow), "RegFaultOverflow")
	d.regs.Store(abi.RegFaultGet, put0+uint64(len(want)))
	for p := uint64(0); p <= 8; p++ {
		mapBack(t, d, burstBase+p<<abi.PageShift)
	}
	replay(d)
	require.Equal(t, abi.StatusOK, await(t, d, 5, i), "the FILL after one replay")
	assert.Equal(t, bytes.Repeat([]byte{0x5a}, burstLen), data(d)[burstVA:burstVA+burstLen], "the FILL's bytes are wrong after the replay")
	if got := d.regs.Load(abi.RegFaultPut); got != put0+uint64(len(want)) {
		t.Errorf("RegFaultPut = %d after the replay; want %d: no fault after every page was mapped", got, put0+uint64(len(want)))
	}
}

// TestAFaultBurstOverflowsDuplicatesFirst: a ring of 8 records holds the
// first wave — every page once — and the duplicates are dropped and
// counted in RegFaultOverflow.
func TestAFaultBurstOverflowsDuplicatesFirst(t *testing.T) {
	d := setupBurst(t, 8, 2<<20)
	want := burstWant()
	put0, over0 := d.regs.Load(abi.RegFaultPut), d.regs.Load(abi.RegFaultOverflow)
	publish(d, 5, abi.Command{Op: abi.OpFill, Dst: burstVA, Size: burstLen, Value: 0x5a})
	waitFor(t, "the channel stalled", func() bool { return stateFlags(d, 5) == abi.StateSaved|abi.StateFaulted })
	if got := d.regs.Load(abi.RegFaultPut) - put0; got != 8 {
		t.Errorf("%d records written into a ring of 8; want 8", got)
	}
	if got := d.regs.Load(abi.RegFaultOverflow) - over0; got != uint64(len(want)-8) {
		t.Errorf("%d records dropped; want %d", got, len(want)-8)
	}
	for k, va := range want[:8] {
		if r := record(t, d, put0+uint64(k), 8); r.VA != va {
			t.Errorf("record %d at %#x; want %#x (one per page, in address order)", k, r.VA, va)
		}
	}
}

// TestAFaultBurstIsBoundedByItsWindow: RegFaultBurst of 8 KiB looks at
// the pages of the first 8 KiB of the operand only (pages 0, 1 and 2:
// [VA, VA+8 KiB) reaches into page 2).
func TestAFaultBurstIsBoundedByItsWindow(t *testing.T) {
	d := setupBurst(t, 64, 8<<10)
	put0 := d.regs.Load(abi.RegFaultPut)
	publish(d, 5, abi.Command{Op: abi.OpFill, Dst: burstVA, Size: burstLen, Value: 0x5a})
	waitFor(t, "the channel stalled", func() bool { return stateFlags(d, 5) == abi.StateSaved|abi.StateFaulted })
	seen := map[uint64]bool{}
	for k := put0; k < d.regs.Load(abi.RegFaultPut); k++ {
		seen[record(t, d, k, 64).VA>>abi.PageShift<<abi.PageShift] = true
	}
	for p := uint64(0); p <= 8; p++ {
		if va := burstBase + p<<abi.PageShift; seen[va] != (p <= 2) {
			t.Errorf("page %d recorded: %v; want %v", p, seen[va], p <= 2)
		}
	}
}
