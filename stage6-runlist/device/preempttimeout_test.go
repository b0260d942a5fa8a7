package device

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
)

// The preempt timeout's tests (preempttimeout.go). The scenario is the
// red team's: a stranger's SPIN of one and a half watchdog limits ends
// before the watchdog's reset, which comes at two, so the watchdog never
// judges it; meanwhile every channel that wants its engine waits. With a
// preempt timeout the engine asks the SPIN to give way as soon as another
// channel should run, and resets under it a preempt timeout later.
//
// Orders in time are read from the device clock, and every bound below
// has a margin that only a machine which keeps the watchdog unit or an
// engine off a core for a second can eat; without the preempt timeout the
// victim waits out the whole SPIN, three seconds.

const (
	ptLimit   = 2_000_000_000 // the watchdog's limit: softgpud's default, 2 s
	ptSpin    = 3_000_000_000 // a SPIN of one and a half limits: the watchdog would reset it only at two
	ptTimeout = 50_000_000    // the preempt timeout: 50 ms
	ptSlice   = 1_000_000     // each channel's timeslice: 1 ms
	ptMargin  = 1_000_000_000 // what a loaded machine may add to a wait: 1 s
)

// setPreemptTimeout sets engine e's watchdog limit and preempt timeout.
func setPreemptTimeout(d *Device, e abi.Engine, limit, timeout uint64) {
	d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, limit)
	d.regs.Store(abi.EngineControlPage(e)+abi.RegPreemptTimeout, timeout)
}

// strangerEntry is a runlist entry for channel c in testCtx, unprivileged,
// with a state block and a timeslice of slice cycles.
func strangerEntry(t testing.TB, d *Device, c abi.Channel, slice uint64) abi.RunlistEntry {
	t.Helper()
	userTables(t, d) // a SPIN touches no memory: the context needs no mapping, only to be enabled
	ent := rlEntry(d, c, abi.PriorityNormal, slice)
	ent.Flags, ent.Context = 0, testCtx
	return ent
}

// spinStarted waits until engine e runs a command under the unit's watch.
func spinStarted(t testing.TB, d *Device, e abi.Engine) {
	t.Helper()
	waitUntil(t, "the SPIN to start", func() bool { return d.engines[e].wd.since.Load() != 0 })
}

// TestASpinThatWillNotYieldIsResetAtThePreemptTimeout: a stranger's
// channel runs SPINs that would end before the watchdog's reset; a
// victim's command on the same engine completes within a timeslice and
// the preempt timeout of becoming runnable; the SPIN is stopped by a
// reset of the engine, no sooner than the preempt timeout, and blamed as
// the watchdog's reset blames: StatusTimeout, its channel faulted
// (FaultTimeout, so its next SPIN never runs), its context faulted
// (FaultHung), a timeout and a reset counted. The victim is not touched.
func TestASpinThatWillNotYieldIsResetAtThePreemptTimeout(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, stranger, victim = abi.EngineCompute, abi.Channel(12), abi.Channel(13)
	setPreemptTimeout(d, e, ptLimit, ptTimeout)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		strangerEntry(t, d, stranger, ptSlice), rlEntry(d, victim, abi.PriorityNormal, ptSlice)}), "runlist")
	spin := abi.Command{Op: abi.OpSpin, Ctx: testCtx, Value: ptSpin}
	first := publish(d, stranger, spin, spin)
	spinStarted(t, d, e)

	runnable := d.clock.Now()
	i := publish(d, victim, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 1})
	require.Equal(t, abi.StatusOK, await(t, d, victim, i), "the victim's NOP")
	if waited := fenceStamp(t, d, victim) - runnable; waited > ptSlice+ptTimeout+ptMargin {
		t.Errorf("the victim's NOP completed %d cycles after it became runnable; want within a timeslice and the preempt timeout (%d) and a margin (%d)",
			waited, uint64(ptSlice+ptTimeout), uint64(ptMargin))
	}

	require.Equal(t, abi.StatusTimeout, await(t, d, stranger, first), "the stranger's first SPIN")
	st := abi.ChannelStatusPage(stranger)
	assert.Equal(t, abi.FaultTimeout, abi.ChannelFault(d.regs.Load(st+abi.RegChannelFault)), "the stranger's channel's fault")
	if ran := d.regs.Load(st + abi.RegChannelFaultValue); ran < ptTimeout || ran >= ptSpin {
		t.Errorf("the stranger's SPIN was reset after %d cycles; want at least the preempt timeout (%d), and before its %d cycles were up",
			ran, uint64(ptTimeout), uint64(ptSpin))
	}
	if completed(d, stranger, first+1) {
		t.Errorf("the stranger's second SPIN completed on a faulted channel")
	}
	n, _, f := faultOf(d)
	assert.Equal(t, uint64(1), n, "the stranger's context's faults")
	assert.Equal(t, abi.FaultHung, f, "the stranger's context's fault")
	assert.Equal(t, uint64(1), counter(d, e, abi.RegTimeouts), "RegTimeouts")
	assert.Equal(t, uint64(1), counter(d, e, abi.RegResets), "RegResets")

	assert.Equal(t, abi.FaultNone, abi.ChannelFault(d.regs.Load(abi.ChannelStatusPage(victim)+abi.RegChannelFault)), "the victim's channel's fault")
	assert.Zero(t, d.regs.Load(abi.ContextStatusRegs(0)+abi.RegCtxFaults), "the victim's context's faults")
	assert.Equal(t, abi.StatusOK, await(t, d, victim, publish(d, victim, abi.Command{Op: abi.OpNop})), "the victim after the reset")
}

// TestAnInnocentPreemptedForASpinResumesAfterThePreemptTimeout: an
// innocent ADD32, preempted half-way (forced at its first boundary) by a
// SPIN of higher priority, waits past the aging limit, so the engine asks
// the SPIN to give way and resets under it at the preempt timeout; the
// ADD32 is resubmitted from its saved cursor and each of the two ADD32s
// completes once, leaving memory as two unpreempted ones do.
func TestAnInnocentPreemptedForASpinResumesAfterThePreemptTimeout(t *testing.T) {
	add, want := innocentAdds(t)
	d := openTest(t, Config{MemorySize: hangMemory})
	pattern(data(d))
	const e, innocent, guilty = abi.EngineCompute, abi.Channel(12), abi.Channel(13)
	setPreemptTimeout(d, e, ptLimit, ptTimeout)
	fired := false
	d.engines[e].forcePreempt = func(j *job) bool { // the engine's goroutine
		if j.cmd.Op != abi.OpAdd32 || fired {
			return false
		}
		fired = true
		publish(d, guilty, abi.Command{Op: abi.OpSpin, Ctx: testCtx, Value: ptSpin, Flags: abi.FlagFence, Fence: 1})
		return true
	}
	hung := strangerEntry(t, d, guilty, 0)
	hung.Priority = abi.PriorityHigh
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		rlEntry(d, innocent, abi.PriorityNormal, 0), hung}), "runlist")
	add1, add2 := add, add
	add1.Flags, add1.Fence = abi.FlagFence, 1
	add2.Flags, add2.Fence = abi.FlagFence, 2
	first := publish(d, innocent, add1, add2)
	for k := range uint64(2) {
		require.Equal(t, abi.StatusOK, await(t, d, innocent, first+k), "innocent ADD32 %d", k)
	}
	require.Equal(t, abi.StatusTimeout, await(t, d, guilty, 0), "the SPIN")
	assert.Equal(t, uint64(1), counter(d, e, abi.RegPreempts), "RegPreempts; want the ADD32's one")
	assert.Equal(t, uint64(1), counter(d, e, abi.RegResets), "RegResets")
	fence := abi.ChannelStatusPage(innocent) + abi.RegFence
	waitUntil(t, "the innocent channel's fence to reach 2", func() bool { return d.regs.Load(fence) >= 2 })
	assert.Equal(t, uint64(2), d.regs.Load(fence), "the innocent channel's fence")
	assert.Equal(t, abi.FaultNone, abi.ChannelFault(d.regs.Load(abi.ChannelStatusPage(innocent)+abi.RegChannelFault)), "the innocent channel's fault")
	if !bytes.Equal(data(d), want) {
		t.Errorf("memory differs from two unpreempted ADD32s at byte %d", firstDiff(data(d), want))
	}
}

// TestACommandThatYieldsInTimeIsNeverReset: under a preempt timeout far
// shorter than the commands, commands that reach their preemption points
// are preempted and resumed, never reset; and a SPIN asked to give way
// that ends before its deadline completes. The timeout is short, but a
// command with boundaries answers the engine at the boundary where it is
// asked, so no deadline is ever set for it.
func TestACommandThatYieldsInTimeIsNeverReset(t *testing.T) {
	const timeout = 5_000_000 // 5 ms
	for _, tc := range []struct {
		name    string
		cmd     abi.Command
		preempt bool // it reaches preemption points, and must be preempted
	}{
		{"DELAY", abi.Command{Op: abi.OpDelay, Value: 100_000_000}, true},                 // 100 ms, a boundary every few polls
		{"FILL", abi.Command{Op: abi.OpFill, Dst: 0x1000, Size: 3 << 20, Value: 7}, true}, // 48 chunks
		{"SPIN shorter than the timeout", abi.Command{Op: abi.OpSpin, Value: timeout / 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTest(t, Config{MemorySize: 4 << 20})
			const e, long, other = abi.EngineCompute, abi.Channel(12), abi.Channel(13)
			setPreemptTimeout(d, e, ptLimit, timeout)
			require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
				rlEntry(d, long, abi.PriorityNormal, 10_000), rlEntry(d, other, abi.PriorityNormal, 10_000)}), "runlist") // 10 µs slices
			// The other channel's DELAYs first: they want the engine for
			// 20 ms, so the long command shares it with them wherever the
			// test goroutine is descheduled between the two publishes.
			delays := make([]abi.Command, 20)
			for k := range delays {
				delays[k] = abi.Command{Op: abi.OpDelay, Value: 1_000_000} // 1 ms
			}
			j := publish(d, other, delays...)
			i := publish(d, long, tc.cmd)
			assert.Equal(t, abi.StatusOK, await(t, d, long, i), "the long %s", tc.name)
			for k := range uint64(len(delays)) {
				assert.Equal(t, abi.StatusOK, await(t, d, other, j+k), "the other channel's DELAY %d", k)
			}
			assert.Zero(t, counter(d, e, abi.RegResets), "RegResets")
			assert.Zero(t, counter(d, e, abi.RegTimeouts), "RegTimeouts")
			if preempts := counter(d, e, abi.RegPreempts); tc.preempt && preempts == 0 {
				t.Errorf("RegPreempts = 0; want the two channels' commands preempted and resumed")
			}
		})
	}
}

// TestAPreemptTimeoutBlamesOnlyTheCommandItAsked: a short SPIN is asked
// to give way and ends before its deadline, and a long SPIN of another
// channel takes the engine after it. The deadline was the short SPIN's:
// the long one is reset only a preempt timeout after it was asked itself.
// A timer of the engine's, armed for the first and fired under the
// second, would reset it about half a timeout after it began — i915 had
// that bug ("drm/i915/gt: Restrict forced preemption to the active
// context").
func TestAPreemptTimeoutBlamesOnlyTheCommandItAsked(t *testing.T) {
	const timeout = 100_000_000 // 100 ms
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, short, long, waiter = abi.EngineCompute, abi.Channel(12), abi.Channel(13), abi.Channel(14)
	setPreemptTimeout(d, e, ptLimit, timeout)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		rlEntry(d, short, abi.PriorityNormal, ptSlice), rlEntry(d, long, abi.PriorityNormal, ptSlice),
		rlEntry(d, waiter, abi.PriorityNormal, ptSlice)}), "runlist")
	s := publish(d, short, abi.Command{Op: abi.OpSpin, Value: timeout / 2})
	spinStarted(t, d, e)
	l := publish(d, long, abi.Command{Op: abi.OpSpin, Value: ptSpin}) // next after short in runlist order
	w := publish(d, waiter, abi.Command{Op: abi.OpNop})

	assert.Equal(t, abi.StatusOK, await(t, d, short, s), "the short SPIN, asked to give way, ended before its deadline")
	require.Equal(t, abi.StatusTimeout, await(t, d, long, l), "the long SPIN")
	// The engine completes the command before it faults the channel (step,
	// then hang), and the fault publishes the value stored before it: read
	// the value once the fault is seen, not at the completion.
	st := abi.ChannelStatusPage(long)
	waitUntil(t, "the long SPIN's channel to fault", func() bool { return abi.ChannelFault(d.regs.Load(st+abi.RegChannelFault)) != abi.FaultNone })
	if ran := d.regs.Load(st + abi.RegChannelFaultValue); ran < timeout {
		t.Errorf("the long SPIN was reset after %d cycles on the engine; want at least the preempt timeout, %d: it was reset on the short SPIN's deadline",
			ran, uint64(timeout))
	}
	assert.Equal(t, abi.FaultNone, abi.ChannelFault(d.regs.Load(abi.ChannelStatusPage(short)+abi.RegChannelFault)), "the short SPIN's channel's fault")
	assert.Equal(t, abi.StatusOK, await(t, d, waiter, w), "the waiting channel's NOP")
	assert.Equal(t, uint64(1), counter(d, e, abi.RegResets), "RegResets")
}

// TestAPreemptTimeoutAloneDoesNotWakeTheUnit: with a preempt timeout and
// no watchdog, the unit has nothing to time until a command with no
// preemption point is asked to give way. Channels that share an engine,
// preempting each other's DELAYs all along, never wake it. (A loaded
// machine can only delay the unit: it cannot add wakes.)
func TestAPreemptTimeoutAloneDoesNotWakeTheUnit(t *testing.T) {
	d := openTest(t, Config{MemorySize: 4 << 20})
	const e, a, b = abi.EngineCompute, abi.Channel(12), abi.Channel(13)
	setPreemptTimeout(d, e, 0, 1_000_000) // 1 ms
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), abi.PriorityNormal, 0),
		rlEntry(d, a, abi.PriorityNormal, 100_000), rlEntry(d, b, abi.PriorityNormal, 100_000)}), "runlist")
	delays := make([]abi.Command, 20)
	for k := range delays {
		delays[k] = abi.Command{Op: abi.OpDelay, Value: 2_000_000} // 2 ms: a timeout's worth and more, every one
	}
	// A loaded machine can leave a round with no preemption at all: a CI
	// run beside other packages' tests read RegPreempts 0 after one (why,
	// the test does not see). So rounds go on, up to five, until the
	// channels have preempted each other; every round counts for the
	// unit's wakes.
	for round := 0; round < 5 && counter(d, e, abi.RegPreempts) == 0; round++ {
		i, j := publish(d, a, delays...), publish(d, b, delays...)
		for k := range uint64(len(delays)) {
			require.Equal(t, abi.StatusOK, await(t, d, a, i+k), "channel a's DELAY %d", k)
			require.Equal(t, abi.StatusOK, await(t, d, b, j+k), "channel b's DELAY %d", k)
		}
	}
	assert.NotZero(t, counter(d, e, abi.RegPreempts), "RegPreempts after five rounds; want the channels to have preempted each other")
	if got := d.wakes.Load(); got != 0 {
		t.Errorf("watchdog unit woke %d times under a preempt timeout with no command to force; want 0", got)
	}
}
