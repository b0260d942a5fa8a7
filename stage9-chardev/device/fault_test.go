package device

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
)

// The tests of replayable faults (fault.go), playing the driver's part by
// hand: the fault buffer sits in data memory the commands do not touch, a
// "managed page" is a leaf of context 0's identity map set to
// abi.ManagedPTE, and "migrating" it is writing its bytes and the identity
// entry back, then storing RegFaultReplay.

// faultBuf is the PA of the tests' fault buffer: the last 4 KiB of data
// memory, which no command here reaches.
const faultBuf = testMem - 4096

// setFaultBuffer configures a ring of records at faultBuf (records 0: off)
// and asks for no interrupts: these tests poll.
func setFaultBuffer(d *Device, records uint64) {
	d.regs.Store(abi.RegFaultNeedIrq, 0)
	d.regs.Store(abi.RegFaultBufSize, records)
	d.regs.Store(abi.RegFaultGet, d.regs.Load(abi.RegFaultPut))
	if records == 0 {
		d.regs.Store(abi.RegFaultBufBase, 0)
		return
	}
	d.regs.Store(abi.RegFaultBufBase, faultBuf)
}

// leafPA returns the PA of the 4 KiB leaf entry of context 0 for va.
func leafPA(t testing.TB, d *Device, va uint64) uint64 {
	t.Helper()
	tb := &tables{d: d}
	table := d.regs.Load(abi.ContextRegs(0) + abi.RegCtxRoot)
	for level := abi.RootLevel; level < abi.LeafLevel; level++ {
		e := tb.read(pteAt(table, va, level))
		if !e.Valid() {
			t.Fatalf("no table for %#x at level %d", va, level)
		}
		table = e.Frame()
	}
	return pteAt(table, va, abi.LeafLevel)
}

// setManaged makes the page at va (identity-mapped) a managed page not on
// the device; mapBack makes it resident again, at its own address.
func setManaged(t testing.TB, d *Device, va uint64) {
	(&tables{d: d}).write(leafPA(t, d, va), abi.ManagedPTE)
}

func mapBack(t testing.TB, d *Device, va uint64) {
	(&tables{d: d}).write(leafPA(t, d, va), abi.MakePage(va, abi.PTEPage4K, true, false))
}

// replay stores the next replay generation and wakes the engines, as the
// driver's replay does.
func replay(d *Device) {
	d.regs.Store(abi.RegFaultReplay, d.regs.Load(abi.RegFaultReplay)+1)
	for e := range abi.Engine(abi.NumEngines) {
		d.WakeEngine(e)
	}
}

// record reads fault record n (a free-running count) of a ring of size.
func record(t testing.TB, d *Device, n, size uint64) abi.FaultRecord {
	t.Helper()
	r, ok := abi.DecodeFaultRecord(d.mem[faultBuf+n%size*abi.FaultRecordSize:])
	if !ok {
		t.Fatalf("fault record %d is malformed: % x", n, d.mem[faultBuf+n%size*abi.FaultRecordSize:][:abi.FaultRecordSize])
	}
	return r
}

// stateFlags reads the flags of channel c's state block.
func stateFlags(d *Device, c abi.Channel) uint64 {
	return binary.LittleEndian.Uint64(d.mem[stateFor(d, c)+abi.StateFlags:])
}

func fenceOf(d *Device, c abi.Channel) uint64 {
	return d.regs.Load(abi.ChannelStatusPage(c) + abi.RegFence)
}

// TestReplayableFaultStallsAndResumes: an ADD32 that reaches a managed
// page after two chunks are done writes one well-formed record, stalls
// its channel (saved, marked faulted, no completion, no fence) while
// another channel on the same engine runs, and after the page is mapped
// and the replay stored finishes with every word added to exactly once.
func TestReplayableFaultStallsAndResumes(t *testing.T) {
	d := openTest(t, Config{})
	const e = abi.EngineCompute
	const stalling, other = abi.Channel(5), abi.Channel(6)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{
		rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, stalling, 1, 0), rlEntry(d, other, 1, 0),
	}), "runlist")
	setFaultBuffer(d, 8)
	mem := data(d)
	pattern(mem[:faultBuf])
	const start, size, page = 0x30000, 0x30000, 0x48000 // the page is in the command's second 64 KiB chunk
	const addend = 0x01020304
	want := bytes.Clone(mem)
	for i := start; i < start+size; i += 4 {
		binary.LittleEndian.PutUint32(want[i:], binary.LittleEndian.Uint32(want[i:])+addend)
	}
	setManaged(t, d, page)
	put0 := d.regs.Load(abi.RegFaultPut)
	i := publish(d, stalling, abi.Command{Op: abi.OpAdd32, Flags: abi.FlagFence, Fence: 77, Dst: start, Size: size, Value: addend})
	waitFor(t, "a fault record", func() bool { return d.regs.Load(abi.RegFaultPut) == put0+1 })
	waitFor(t, "the stalled command saved, marked faulted", func() bool {
		return stateFlags(d, stalling) == abi.StateSaved|abi.StateFaulted
	})
	r := record(t, d, put0, 8)
	if r.VA != page || r.Channel != stalling || r.Context != 0 || r.Engine != e || !r.Write {
		t.Errorf("record = %+v; want VA %#x, channel %d, context 0, engine %v, a write", r, page, stalling, e)
	}
	assert.Equal(t, uint64(page-start), binary.LittleEndian.Uint64(d.mem[stateFor(d, stalling)+abi.StateDone:]), "saved cursor, the bytes before the managed page")
	// The other channel on the engine goes on.
	j := publish(d, other, abi.Command{Op: abi.OpFill, Dst: 0x80000, Size: 4096, Value: 0xab})
	require.Equal(t, abi.StatusOK, await(t, d, other, j), "the other channel's FILL")
	copy(want[0x80000:0x81000], bytes.Repeat([]byte{0xab}, 4096))
	// No replay has been stored, so nothing can have finished the command.
	if entry(d, stalling, i) == i || fenceOf(d, stalling) == 77 {
		t.Fatalf("the stalled command completed (entry %#x, fence %d) before any replay", entry(d, stalling, i), fenceOf(d, stalling))
	}
	assert.Equal(t, uint64(0), d.regs.Load(abi.RegFaultOverflow), "RegFaultOverflow")
	// Migrate: the page's data is what it was (the pattern), now resident.
	mapBack(t, d, page)
	replay(d)
	require.Equal(t, abi.StatusOK, await(t, d, stalling, i), "the replayed ADD32")
	waitFence(t, d, stalling, 77)
	if k := firstDiff(mem[:faultBuf], want[:faultBuf]); k >= 0 { // the buffer holds the record
		t.Fatalf("memory after the replayed ADD32 differs at %#x: %#x; want %#x (an addend applied twice or not at all)", k, mem[k], want[k])
	}
	assert.Equal(t, put0+1, d.regs.Load(abi.RegFaultPut), "RegFaultPut, one record")
}

// TestNotResidentWithoutAFaultBuffer: with no fault buffer set up, a
// managed page fails the command as an unmapped page does (the same
// status), with the fault in the context's registers, and no record.
func TestNotResidentWithoutAFaultBuffer(t *testing.T) {
	d := openTest(t, Config{})
	const e, c = abi.EngineCopy, abi.Channel(9)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, c, 1, 0)}), "runlist")
	setFaultBuffer(d, 0)
	const unmappedPage, managedPage = 0x20000, 0x40000
	(&tables{d: d}).write(leafPA(t, d, unmappedPage), 0)
	setManaged(t, d, managedPage)
	st := d.regs
	ctxStatus := abi.ContextStatusRegs(0)
	want := await(t, d, c, publish(d, c, abi.Command{Op: abi.OpFill, Dst: unmappedPage, Size: 8, Value: 1}))
	if want == abi.StatusOK {
		t.Fatalf("a FILL of an unmapped page succeeded")
	}
	faults := st.Load(ctxStatus + abi.RegCtxFaults)
	put0 := st.Load(abi.RegFaultPut)
	assert.Equal(t, want, await(t, d, c, publish(d, c, abi.Command{Op: abi.OpFill, Dst: managedPage + 8, Size: 8, Value: 1})), "a FILL of a managed page with no fault buffer, as for an unmapped page")
	assert.Equal(t, faults+1, st.Load(ctxStatus+abi.RegCtxFaults), "RegCtxFaults")
	if va, info := st.Load(ctxStatus+abi.RegCtxFaultVA), abi.Fault(st.Load(ctxStatus+abi.RegCtxFaultInfo)); va != managedPage+8 || info != abi.FaultNotResident|abi.FaultWrite {
		t.Errorf("context fault = %#x, %v; want %#x, %v", va, info, managedPage+8, abi.FaultNotResident|abi.FaultWrite)
	}
	if got := st.Load(abi.RegFaultPut); got != put0 {
		t.Errorf("RegFaultPut moved from %d to %d with no buffer", put0, got)
	}
	if flags := stateFlags(d, c); flags&abi.StateFaulted != 0 {
		t.Errorf("state block flags = %#x; want no stall", flags)
	}
}

// TestAFullFaultBufferDropsButStalls: with a ring of one record that the
// "driver" has not read, a second channel's fault is dropped and counted
// in RegFaultOverflow, and that channel stalls all the same. A replay
// (with the first page mapped and the ring read) finishes the first
// channel and makes the second fault again, into the ring this time; a
// second replay after its page is mapped finishes it. Nothing is lost.
func TestAFullFaultBufferDropsButStalls(t *testing.T) {
	d := openTest(t, Config{})
	const e = abi.EngineCopy
	const first, second = abi.Channel(5), abi.Channel(6)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{
		rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, first, 1, 0), rlEntry(d, second, 1, 0),
	}), "runlist")
	setFaultBuffer(d, 1)
	mem := data(d)
	const pageA, pageB = 0x40000, 0x50000
	setManaged(t, d, pageA)
	setManaged(t, d, pageB)
	put0, over0 := d.regs.Load(abi.RegFaultPut), d.regs.Load(abi.RegFaultOverflow)
	i := publish(d, first, abi.Command{Op: abi.OpFill, Dst: pageA, Size: 4096, Value: 0xa1})
	waitFor(t, "the first channel's record", func() bool { return d.regs.Load(abi.RegFaultPut) == put0+1 })
	j := publish(d, second, abi.Command{Op: abi.OpFill, Dst: pageB + 100, Size: 100, Value: 0xb2})
	waitFor(t, "the second record dropped", func() bool { return d.regs.Load(abi.RegFaultOverflow) == over0+1 })
	waitFor(t, "the second channel stalled", func() bool { return stateFlags(d, second) == abi.StateSaved|abi.StateFaulted })
	if got := d.regs.Load(abi.RegFaultPut); got != put0+1 {
		t.Errorf("RegFaultPut = %d with a full ring; want %d", got, put0+1)
	}
	if r := record(t, d, put0, 1); r.Channel != first || r.VA != pageA {
		t.Errorf("the ring's record = %+v; want channel %d at %#x (the dropped one must not overwrite it)", r, first, pageA)
	}
	if entry(d, second, j) == j {
		t.Fatalf("the channel whose record was dropped completed without a replay")
	}
	// The driver reads the ring, migrates pageA only, and replays.
	d.regs.Store(abi.RegFaultGet, put0+1)
	mapBack(t, d, pageA)
	replay(d)
	if st := await(t, d, first, i); st != abi.StatusOK || mem[pageA] != 0xa1 || mem[pageA+4095] != 0xa1 {
		t.Fatalf("the first channel after the replay: %v, bytes %#x %#x", st, mem[pageA], mem[pageA+4095])
	}
	waitFor(t, "the second channel's fault recorded on the replay", func() bool { return d.regs.Load(abi.RegFaultPut) == put0+2 })
	if r := record(t, d, put0+1, 1); r.Channel != second || r.VA != pageB+100 || !r.Write || r.Engine != e {
		t.Errorf("the replayed fault's record = %+v; want channel %d, VA %#x, a write on %v", r, second, pageB+100, e)
	}
	if entry(d, second, j) == j {
		t.Fatalf("the second channel completed with its page still not resident")
	}
	d.regs.Store(abi.RegFaultGet, put0+2)
	mapBack(t, d, pageB)
	replay(d)
	require.Equal(t, abi.StatusOK, await(t, d, second, j), "the second channel after its replay")
	assert.Equal(t, bytes.Repeat([]byte{0xb2}, 100), mem[pageB+100:pageB+200], "the second FILL's bytes are wrong")
	assert.Equal(t, over0+1, d.regs.Load(abi.RegFaultOverflow), "RegFaultOverflow")
}
