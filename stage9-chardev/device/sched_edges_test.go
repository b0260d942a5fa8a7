package device

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
)

// TestASpentSliceHandsTheEngineToAnEqual: two channels of equal priority
// with a 20 µs slice; the first has 100 DELAYs of 5 µs queued (500 µs of
// work, well inside starveLimit, so starvation cannot be what lets the
// other in), then a FILL of a flag; the second a COPY of that flag. With
// slices the COPY runs once the first channel's slice is spent, long
// before its FILL; without them it runs only after the whole queue. The
// verdict is what the COPY read — the engine's order, not the host's
// timing. (Mutation S6-01: the slice never counts as spent.)
func TestASpentSliceHandsTheEngineToAnEqual(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, a, b = abi.EngineCopy, abi.Channel(24), abi.Channel(25)
	const flag, seen = 1 << 20, 2 << 20
	mem := data(d)
	clear(mem[flag : flag+64])
	clear(mem[seen : seen+64])
	cmds := make([]abi.Command, 100, 101)
	for n := range cmds {
		cmds[n] = abi.Command{Op: abi.OpDelay, Value: 5_000}
	}
	cmds = append(cmds, abi.Command{Op: abi.OpFill, Dst: flag, Size: 64, Value: 1})
	last := publish(d, a, cmds...) + uint64(len(cmds)) - 1
	i := publish(d, b, abi.Command{Op: abi.OpCopy, Src: flag, Dst: seen, Size: 64})
	// The runlist last, so the engine finds both with work at once.
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, a, abi.PriorityNormal, 20_000), rlEntry(d, b, abi.PriorityNormal, 20_000)}), "runlist")
	require.Equal(t, abi.StatusOK, await(t, d, b, i), "the COPY")
	require.Equal(t, abi.StatusOK, await(t, d, a, last), "the FILL")
	require.Equal(t, byte(0), mem[seen], "the COPY ran after all of the other channel's 500 µs of work: its 20 µs slice never ran out")
}

// TestASwitchGivesTheNewChannelAWholeSlice: a channel that gets the engine
// gets a fresh slice, so an equal channel waiting does not take it back at
// once. Channel a (a 20 ms slice, 60 ms of work) hands the engine to b when
// its slice is spent; b's queue — snapshot a's counter, four short DELAYs,
// snapshot again, some microseconds in all — then runs whole inside b's
// own 10 ms slice: the two snapshots agree. Had b's slice been counted from
// when a got the engine, it would be spent on arrival, and a's ADD32s
// would run between b's commands. The slices are milliseconds so that a
// host that deschedules the engine for a scheduler tick or two does not
// spend b's slice on correct code. (Mutation S6-02: switchTo leaves
// sliceStart alone.)
func TestASwitchGivesTheNewChannelAWholeSlice(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, a, b = abi.EngineCompute, abi.Channel(26), abi.Channel(27)
	const counter, seen = 1 << 20, 2 << 20
	mem := data(d)
	clear(mem[counter : counter+64])
	clear(mem[seen : seen+64])
	var cmds []abi.Command
	for range 60 { // 60 × 1 ms: a's slice runs out a third of the way
		cmds = append(cmds, abi.Command{Op: abi.OpDelay, Value: 1_000_000}, abi.Command{Op: abi.OpAdd32, Dst: counter, Size: 4, Value: 1})
	}
	last := publish(d, a, cmds...) + uint64(len(cmds)) - 1
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, a, abi.PriorityNormal, 20_000_000), rlEntry(d, b, abi.PriorityNormal, 10_000_000)}), "runlist")
	// b's queue only once a has the engine, so that a has held it when b
	// is chosen: b's slice then starts at the switch, or, under the
	// mutant, is a's, spent.
	waitUntil(t, "a's first ADD32", func() bool { return mem[counter] != 0 })
	snap := func(at uint64) abi.Command { return abi.Command{Op: abi.OpSum32, Src: counter, Dst: at, Size: 4} }
	bcmds := []abi.Command{snap(seen)}
	for range 4 {
		bcmds = append(bcmds, abi.Command{Op: abi.OpDelay, Value: 1_000})
	}
	bcmds = append(bcmds, snap(seen+8))
	i := publish(d, b, bcmds...) + uint64(len(bcmds)) - 1
	require.Equal(t, abi.StatusOK, await(t, d, b, i), "b's last snapshot")
	require.Equal(t, abi.StatusOK, await(t, d, a, last), "a's last ADD32")
	first, second := mem[seen], mem[seen+8]
	require.Equal(t, first, second, "a's counter moved between b's commands: b lost the engine before its slice was spent")
}

// TestACorruptStateBlockFaultsTheChannel: the state block of a preempted
// command is device memory, read back as input: a block whose flags do not
// say saved, whose index is not the command the engine fetched last, or
// whose cursor is past the command's end faults the channel with
// FaultState — the command does not run. (Mutation S6-11: resume no
// longer checks the index; the context stamp then catches it, but as
// FaultContextSave, and a block whose stamp happened to match would run.)
func TestACorruptStateBlockFaultsTheChannel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		off   uint64
		spoil func(v uint64) uint64
	}{
		{"index", abi.StateSeq, func(v uint64) uint64 { return v + 1 }},
		{"flags", abi.StateFlags, func(uint64) uint64 { return 2 }},
		{"cursor", abi.StateDone, func(uint64) uint64 { return 2 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fault, _, done := spoilWhileSaved(t, func(d *Device, c abi.Channel) {
				at := stateFor(d, c) + tc.off
				binary.LittleEndian.PutUint64(d.mem[at:], tc.spoil(binary.LittleEndian.Uint64(d.mem[at:])))
			})
			assert.Equal(t, abi.FaultState, fault, "fault")
			if done {
				t.Errorf("the fill completed from a corrupt state block")
			}
		})
	}
}

// TestTimeOnTheEngineSurvivesPreemption: the watchdog counts a command's
// time on the engine across its preemptions (the state block's StateRan),
// so a DELAY three times the limit, preempted at every boundary, still
// times out; it does not get a fresh budget at each resume. (Mutation
// S6-10: resume sets ran to 0.)
func TestTimeOnTheEngineSurvivesPreemption(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, c = abi.EngineCopy, abi.Channel(9)
	const limit = 50_000_000 // 50 ms
	d.engines[e].forcePreempt = func(*job) bool { return true }
	d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, limit)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		rlEntry(d, c, abi.PriorityNormal, 0)}), "runlist")
	i := publish(d, c, abi.Command{Op: abi.OpDelay, Value: 3 * limit})
	require.Equal(t, abi.StatusTimeout, await(t, d, c, i), "a DELAY of 3× the watchdog, preempted at every boundary")
	require.NotZero(t, counter(d, e, abi.RegPreempts), "preemptions")
}

// TestAChannelWithNoStateBlockIsNeverPreempted: a runlist entry with no
// state block (State 0) names a channel whose commands cannot be saved, so
// they run to the end even when asked to stop at every boundary, and
// nothing is written where a state block would be (PA 0 is data memory).
// (Mutation S6-28: preemptible ignores the state block.)
func TestAChannelWithNoStateBlockIsNeverPreempted(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, c = abi.EngineCopy, abi.Channel(9)
	d.engines[e].forcePreempt = func(*job) bool { return true }
	mem := data(d)
	pattern(mem[:4096])
	before := append([]byte(nil), mem[:4096]...)
	plain := rlEntry(d, c, abi.PriorityNormal, 0)
	plain.State = 0
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0), plain}), "runlist")
	i := publish(d, c, abi.Command{Op: abi.OpFill, Dst: 1 << 20, Size: 1 << 20, Value: 7})
	require.Equal(t, abi.StatusOK, await(t, d, c, i), "the FILL")
	require.Zero(t, counter(d, e, abi.RegPreempts), "preemptions of a channel with no state block")
	require.Equal(t, before, mem[:4096], "memory at PA 0 changed: a state block was written where there is none")
}
