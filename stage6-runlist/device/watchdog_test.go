package device

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
)

// The TDR's tests. One scenario, four tests of what it must show: on the
// compute engine an innocent channel's ADD32 is preempted half-way (the
// test forces it at its first boundary), and the channel that preempted it
// runs an OpSpin, which never reaches a preemption point. The watchdog
// unit must catch it, reset the engine, fault the guilty channel alone,
// resume the innocent ADD32 exactly once, and leave every other channel
// running — the copy engine's meanwhile, the compute engine's after.
//
// Orders in time are read from the device clock (RegFenceCycles: when a
// fence was written), never from the test's wall clock, so a loaded
// machine that stalls the test goroutine cannot make them flake: the
// unit cannot act before the command has run hangLimit on the engine, and
// the copy engine's command is submitted once the spin has started.

// hangLimit is the scenario's watchdog: long enough that the test
// goroutine submits the copy engine's command well within the hang, and
// that the innocent ADD32 (two chunks and a bit) stays far inside it even
// under the race detector on a loaded machine.
const hangLimit = 200_000_000 // 200 ms

// hangMemory is the device memory of the scenarios that preempt an
// innocent's ADD32s: innocentAdds runs them on a device of this size.
const hangMemory = 4 << 20

// innocentAdds returns the ADD32 an innocent channel runs twice in the
// scenarios that preempt it, and the memory two of them leave when nothing
// preempts them, taken from a reference device of hangMemory bytes run and
// closed first. The ADD32 spans three runs, so its first boundary comes
// with most of it still to do.
func innocentAdds(t *testing.T) (add abi.Command, want []byte) {
	t.Helper()
	const n = 2*chunk + 4096
	add = abi.Command{Op: abi.OpAdd32, Dst: 0x1000, Size: n, Value: 1}
	ref := openVM(t, Config{MemorySize: hangMemory})
	pattern(data(ref))
	for range 2 {
		require.Equal(t, abi.StatusOK, run(t, ref, abi.EngineCompute, add), "ADD32 unpreempted")
	}
	want = bytes.Clone(data(ref))
	ref.Close()
	return add, want
}

// hang is what the scenario observed.
type hang struct {
	d                    *Device
	innocent, guilty     abi.Channel
	innocentIdx, spinIdx uint64
	spinStarted          uint64 // device clock when the spin was published
	otherFenceAt         uint64 // device clock of the copy engine's fence, during the hang
	spinFenceAt          uint64 // device clock of the guilty spin's fence (its completion)
	want                 []byte // data as two unpreempted ADD32s leave it
}

func runHang(t *testing.T) hang {
	t.Helper()
	add, want := innocentAdds(t)
	d := openTest(t, Config{MemorySize: hangMemory})
	pattern(data(d))
	const e = abi.EngineCompute
	h := hang{d: d, innocent: 12, guilty: 13, want: want}
	d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, hangLimit)
	var fired atomic.Bool
	var started, spinIdx atomic.Uint64
	d.engines[e].forcePreempt = func(j *job) bool { // the engine's goroutine: read only after the runlist below
		if j.cmd.Op != abi.OpAdd32 || fired.Load() {
			return false
		}
		started.Store(d.clock.Now())
		// The guilty channel, of higher priority, rings now: it takes the
		// engine from the preempted ADD32 and never gives it back.
		spinIdx.Store(publish(d, h.guilty, abi.Command{Op: abi.OpSpin, Value: 60_000_000_000, Flags: abi.FlagFence, Fence: 1}))
		fired.Store(true) // last: the test reads started and spinIdx once it sees this
		return true
	}
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		rlEntry(d, h.innocent, abi.PriorityNormal, 0), rlEntry(d, h.guilty, abi.PriorityHigh, 0)}), "runlist")
	add1, add2 := add, add
	add1.Flags, add1.Fence = abi.FlagFence, 1
	add2.Flags, add2.Fence = abi.FlagFence, 2
	h.innocentIdx = publish(d, h.innocent, add1, add2)
	waitUntil(t, "the spin to start", fired.Load)
	h.spinStarted, h.spinIdx = started.Load(), spinIdx.Load()
	other := abi.DefaultChannel(abi.EngineCopy)
	i := publish(d, other, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 1})
	require.Equal(t, abi.StatusOK, await(t, d, other, i), "the copy engine's NOP during the hang")
	h.otherFenceAt = fenceStamp(t, d, other)
	require.Equal(t, abi.StatusTimeout, await(t, d, h.guilty, h.spinIdx), "the spin")
	h.spinFenceAt = fenceStamp(t, d, h.guilty)
	for k := range uint64(2) {
		require.Equal(t, abi.StatusOK, await(t, d, h.innocent, h.innocentIdx+k), "innocent ADD32 %d", k)
	}
	return h
}

// fenceStamp returns when channel c's first fence was written, in device
// cycles. The engine publishes a command's completion entry, then its
// fence, then the fence's stamp (ring.go, fence.go), so a waiter that saw
// the completion may look before the stamp is there: it waits for it.
func fenceStamp(t *testing.T, d *Device, c abi.Channel) uint64 {
	t.Helper()
	at := abi.ChannelStatusPage(c) + abi.RegFenceCycles
	waitUntil(t, fmt.Sprintf("%v's fence stamp", c), func() bool { return d.regs.Load(at) != 0 })
	return d.regs.Load(at)
}

// TestAHungCommandIsCaughtByAResetOfTheEngine: a command that never
// reaches a preemption point is stopped all the same, by a reset of the
// engine once the preemption request's deadline has passed — not before
// its time on the engine has reached the limit.
func TestAHungCommandIsCaughtByAResetOfTheEngine(t *testing.T) {
	h := runHang(t)
	e := abi.EngineCompute
	assert.Equal(t, uint64(1), counter(h.d, e, abi.RegResets), "RegResets")
	assert.Equal(t, uint64(1), counter(h.d, e, abi.RegTimeouts), "RegTimeouts")
	if ran := h.spinFenceAt - h.spinStarted; ran < hangLimit {
		t.Errorf("the spin was stopped after %d cycles; the watchdog's limit is %d", ran, uint64(hangLimit))
	}
}

// TestAHungCommandFaultsOnlyItsChannel: the guilty channel faults with its
// own status, FaultTimeout, holding the cycles its command ran; the
// innocent channel on the same engine does not fault.
func TestAHungCommandFaultsOnlyItsChannel(t *testing.T) {
	h := runHang(t)
	st := abi.ChannelStatusPage(h.guilty)
	assert.Equal(t, abi.FaultTimeout, abi.ChannelFault(h.d.regs.Load(st+abi.RegChannelFault)), "the guilty channel's fault")
	if ran := h.d.regs.Load(st + abi.RegChannelFaultValue); ran < hangLimit {
		t.Errorf("the guilty channel's fault value = %d cycles; want at least the limit, %d", ran, uint64(hangLimit))
	}
	assert.Equal(t, abi.FaultNone, abi.ChannelFault(h.d.regs.Load(abi.ChannelStatusPage(h.innocent)+abi.RegChannelFault)), "the innocent channel's fault")
}

// TestInnocentWorkInFlightCompletesOnceAfterAReset: the innocent ADD32
// that was preempted half-way when the engine hung is resubmitted from its
// saved state after the reset: each of the two ADD32s completes once, with
// its fence, and memory is what two unpreempted ADD32s leave — no chunk
// added twice (rerun from its start), none skipped.
func TestInnocentWorkInFlightCompletesOnceAfterAReset(t *testing.T) {
	h := runHang(t)
	assert.Equal(t, uint64(1), counter(h.d, abi.EngineCompute, abi.RegPreempts), "RegPreempts; want 1: the innocent ADD32 was in flight when the engine hung")
	// The fence is stored just after the completion entry the test
	// awaited (ring.go, fence.go): wait for it to get there, then ask
	// that it went no further.
	fence := abi.ChannelStatusPage(h.innocent) + abi.RegFence
	waitUntil(t, "the innocent channel's fence to reach 2", func() bool { return h.d.regs.Load(fence) >= 2 })
	assert.Equal(t, uint64(2), h.d.regs.Load(fence), "the innocent channel's fence")
	if next := h.innocentIdx + 2; entry(h.d, h.innocent, next) == next {
		t.Errorf("completion entry %d is written: a command completed that was never submitted", next)
	}
	if !bytes.Equal(data(h.d), h.want) {
		w0 := binary.LittleEndian.Uint32(h.want[0x1000:])
		g0 := binary.LittleEndian.Uint32(data(h.d)[0x1000:])
		t.Fatalf("memory differs from two unpreempted ADD32s (first word %#x; want %#x)", g0, w0)
	}
}

// TestOtherChannelsRunThroughAHang: the copy engine's channel completes a
// command while the compute engine hangs (by the device clock: after the
// spin began, before it was stopped), and the compute engine's default
// channel runs after the reset.
func TestOtherChannelsRunThroughAHang(t *testing.T) {
	h := runHang(t)
	if h.otherFenceAt < h.spinStarted || h.otherFenceAt >= h.spinFenceAt {
		t.Errorf("the copy engine's fence at cycle %d; want it inside the hang, [%d, %d)", h.otherFenceAt, h.spinStarted, h.spinFenceAt)
	}
	def := abi.DefaultChannel(abi.EngineCompute)
	assert.Equal(t, abi.StatusOK, await(t, h.d, def, publish(h.d, def, abi.Command{Op: abi.OpNop})), "the compute engine's default channel after the reset")
}

// TestABadContextSaveAreaFaultsOnlyItsChannel: a save area the runlist
// names that is missing, misaligned or runs past device memory is found
// when the engine first saves to it, and faults that channel with
// FaultContextSave and the address — no panic, no write outside memory —
// while another channel on the engine runs on.
func TestABadContextSaveAreaFaultsOnlyItsChannel(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(d *Device) uint64
	}{
		{"zero", func(*Device) uint64 { return 0 }},
		{"misaligned", func(d *Device) uint64 { return ctxFor(d, 9) + 8 }},
		{"past the end", func(d *Device) uint64 { return uint64(len(d.mem)) - 64 }},
		{"beyond memory", func(*Device) uint64 { return 1 << 62 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTest(t, Config{MemorySize: 4 << 20})
			const e, c = abi.EngineCopy, abi.Channel(9)
			d.engines[e].forcePreempt = func(*job) bool { return true }
			bad := rlEntry(d, c, abi.PriorityNormal, 0)
			bad.CtxSave = tc.at(d)
			require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0), bad}), "runlist")
			publish(d, c, abi.Command{Op: abi.OpFill, Dst: 0x1000, Size: 1 << 20, Value: 7})
			st := abi.ChannelStatusPage(c)
			waitUntil(t, "the channel to fault", func() bool { return d.regs.Load(st+abi.RegChannelFault) != 0 })
			assert.Equal(t, abi.FaultContextSave, abi.ChannelFault(d.regs.Load(st+abi.RegChannelFault)), "fault")
			assert.Equal(t, bad.CtxSave, d.regs.Load(st+abi.RegChannelFaultValue), "fault value; want the save area's address")
			def := abi.DefaultChannel(e)
			assert.Equal(t, abi.StatusOK, await(t, d, def, publish(d, def, abi.Command{Op: abi.OpNop})), "the other channel after the fault")
		})
	}
}

// TestACorruptSavedContextFaultsTheChannel: a context that does not read
// back as the engine saved it (here: its stamp overwritten while the
// command waited preempted) faults the channel with FaultContextSave rather
// than resume the command on someone else's state.
//
// The stamp is spoiled on the engine's own goroutine, at a point that must
// come after the fill's save and before its resume: the one run of a small
// FILL on a channel of higher priority, published at the fill's first
// boundary. After the save the engine must serve that channel first (it
// is of higher priority, and the fill's channel has not waited at all), and
// it can return to the fill only once that FILL has completed. An earlier
// version spoiled the stamp from the test goroutine while a 300 ms DELAY
// held the engine, and waited to see RegPreempts at exactly 1 first; but
// the starvation rule (sched.go, starveLimit) gives the engine back to the
// fill after 1 ms, the two channels then alternate and the counter moves
// on, so a test goroutine kept off the CPU for a millisecond never saw 1
// and failed after 10 s.
func TestACorruptSavedContextFaultsTheChannel(t *testing.T) {
	fault, preempts, done := spoilWhileSaved(t, func(d *Device, c abi.Channel) {
		binary.LittleEndian.PutUint64(d.mem[ctxFor(d, c):], 0xbad)
	})
	assert.Equal(t, abi.FaultContextSave, fault, "fault")
	assert.Equal(t, uint64(1), preempts, "preemptions; want the fill's one")
	if done {
		t.Errorf("the fill completed on a context it never saved")
	}
}

// spoilWhileSaved runs a 1 MiB FILL on channel 9 of a fresh device, has
// it preempted once for a FILL on channel 10 at high priority, and calls
// spoil while the first is saved and not yet resumed (when the engine
// resolves the second's destination); it returns the fault channel 9
// ends with, the copy engine's preemptions, and whether the first FILL
// completed.
func spoilWhileSaved(t *testing.T, spoil func(d *Device, c abi.Channel)) (abi.ChannelFault, uint64, bool) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, c, high = abi.EngineCopy, abi.Channel(9), abi.Channel(10)
	const at = 0x200000 // the high channel's FILL: no run of the test's fill comes near it
	var fired atomic.Bool
	d.engines[e].forcePreempt = func(*job) bool {
		if fired.Swap(true) {
			return false
		}
		publish(d, high, abi.Command{Op: abi.OpFill, Dst: at, Size: 64, Value: 1})
		return true
	}
	d.SetHooks(Hooks{Resolved: func(_ abi.Engine, va uint64, _ bool) {
		if va == at {
			spoil(d, c)
		}
	}})
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, c, abi.PriorityNormal, 0),
		rlEntry(d, high, abi.PriorityHigh, 0)}), "runlist")
	i := publish(d, c, abi.Command{Op: abi.OpFill, Dst: 0x1000, Size: 1 << 20, Value: 7})
	st := abi.ChannelStatusPage(c)
	waitUntil(t, "the channel to fault", func() bool { return d.regs.Load(st+abi.RegChannelFault) != 0 })
	return abi.ChannelFault(d.regs.Load(st + abi.RegChannelFault)), counter(d, e, abi.RegPreempts), completed(d, c, i)
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		runtime.Gosched()
	}
}
