package device

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/spin"
)

// setIdle programs engine e's idle registers as the driver's SetIdle does.
func setIdle(d *Device, e abi.Engine, mode abi.IdleMode, budget uint64) {
	control := abi.EngineControlPage(e)
	d.Registers().Store(control+abi.RegIdleBudget, budget)
	d.Registers().Store(control+abi.RegIdleMode, uint64(mode))
	d.Wake(abi.DefaultChannel(e))
}

func sleeps(d *Device, e abi.Engine) uint64 {
	return d.Registers().Load(abi.EngineStatusPage(e) + abi.RegSleeps)
}

// asleep reports whether engine e says, in its registers, that it is
// asleep: RegEngineState is EngineAsleep and RegNeedWakeup is set, so the
// next doorbell must wake it.
func asleep(d *Device, e abi.Engine) bool {
	status := abi.EngineStatusPage(e)
	return d.Registers().Load(status+abi.RegEngineState) == abi.EngineAsleep && d.Registers().Load(status+abi.RegNeedWakeup) == 1
}

// waitAsleep waits until exactly the engines in want are asleep. An engine
// told to sleep gets there within its budget plus a scheduling delay; 5 s
// is that many orders of magnitude over, so only an engine that never
// sleeps (or never wakes) fails it.
func waitAsleep(t testing.TB, d *Device, want ...abi.Engine) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for e := range abi.Engine(abi.NumEngines) {
			wanted := false
			for _, w := range want {
				wanted = wanted || w == e
			}
			assert.Equal(c, wanted, asleep(d, e), "%v asleep (want asleep: %v)", e, want)
		}
	}, 5*time.Second, 100*time.Microsecond)
}

func TestIdleRegistersResetToHybrid(t *testing.T) {
	d := openTest(t, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		control := abi.EngineControlPage(e)
		mode, budget := abi.IdleMode(d.Registers().Load(control+abi.RegIdleMode)), d.Registers().Load(control+abi.RegIdleBudget)
		if mode != abi.IdleHybrid || budget != abi.DefaultIdleBudget {
			t.Errorf("%v engine at reset: mode %v, budget %d; want hybrid, %d", e, mode, budget, abi.DefaultIdleBudget)
		}
		lo, hi := d.Registers().Load(control+abi.RegIdleBudgetMin), d.Registers().Load(control+abi.RegIdleBudgetMax)
		if lo != abi.DefaultIdleBudgetMin || hi != abi.DefaultIdleBudgetMax {
			t.Errorf("%v engine at reset: adaptive bounds [%d, %d]; want [%d, %d]", e, lo, hi,
				abi.DefaultIdleBudgetMin, abi.DefaultIdleBudgetMax)
		}
	}
}

// TestEachModeIdlesAsItSays runs commands on each idle mode with gaps between
// them and checks, with RegSleeps, whether the engine slept.
func TestEachModeIdlesAsItSays(t *testing.T) {
	tests := []struct {
		name   string
		mode   abi.IdleMode
		budget uint64
		gap    time.Duration
		sleeps bool
	}{
		// Spin never sleeps, whatever the gap.
		{"spin", abi.IdleSpin, 0, 2 * time.Millisecond, false},
		// Sleep sleeps after every command; the gap gives it time to.
		{"sleep", abi.IdleSleep, 0, 2 * time.Millisecond, true},
		// A hybrid budget of an hour is never spent in this test.
		{"hybrid, gap inside the budget", abi.IdleHybrid, uint64(time.Hour), 2 * time.Millisecond, false},
		// A 100 µs budget is spent during a 2 ms gap (or the wait for
		// the engine to sleep below ends it).
		{"hybrid, gap past the budget", abi.IdleHybrid, 100_000, 2 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{})
			setIdle(d, abi.EngineCopy, tt.mode, tt.budget)
			setIdle(d, abi.EngineCompute, abi.IdleSleep, 0) // keep the other engine off the cores
			// The first command runs after the engine has read the new
			// mode (setIdle woke it, if a sleep under the old one had
			// begun), so sleeps counted from here are the new mode's.
			require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "NOP")
			before := sleeps(d, abi.EngineCopy)
			for i := range 5 {
				require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: uint64(i)}), "fill %d", i)
				time.Sleep(tt.gap)
				if tt.sleeps {
					waitAsleep(t, d, abi.EngineCompute, abi.EngineCopy)
				}
			}
			slept := sleeps(d, abi.EngineCopy) - before
			if tt.sleeps && slept < 5 {
				t.Errorf("engine slept %d times in 5 gaps; want at least 5", slept)
			}
			if !tt.sleeps && slept != 0 {
				t.Errorf("engine slept %d times; want 0", slept)
			}
			assert.Equal(t, byte(4), data(d)[63], "memory after the last fill")
		})
	}
}

// TestSetIdleWakesASleeper switches a sleeping engine to spin: it must leave
// sleep at once, not at the next doorbell.
func TestSetIdleWakesASleeper(t *testing.T) {
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCompute, abi.IdleSleep, 0)
	setIdle(d, abi.EngineCopy, abi.IdleSleep, 0)
	waitAsleep(t, d, abi.EngineCompute, abi.EngineCopy)
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	waitAsleep(t, d, abi.EngineCompute)
	setIdle(d, abi.EngineCompute, abi.IdleSpin, 0)
	waitAsleep(t, d)
}

// TestCloseWakesSleepingEngines closes a device whose engines are both
// asleep: Close must return, with both engines stopped.
func TestCloseWakesSleepingEngines(t *testing.T) {
	d := openTest(t, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		setIdle(d, e, abi.IdleSleep, 0)
	}
	waitAsleep(t, d, abi.EngineCompute, abi.EngineCopy)
	d.Close() // the cleanup's Close is then a no-op; leakcheck runs after it
	for e := range abi.Engine(abi.NumEngines) {
		if got := d.Registers().Load(abi.EngineStatusPage(e) + abi.RegEngineState); got != abi.EngineStopped {
			t.Errorf("%v engine after Close: state %d; want EngineStopped", e, got)
		}
	}
}

// TestStaleWakeIsHarmless wakes an engine that is not asleep, then lets it
// sleep: the token left behind sends it once round its loop for nothing,
// and it goes back to sleep; commands before and after run.
func TestStaleWakeIsHarmless(t *testing.T) {
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCompute, abi.IdleSpin, 0)
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	d.Wake(abi.DefaultChannel(abi.EngineCopy)) // a token for an engine that is spinning
	setIdle(d, abi.EngineCopy, abi.IdleSleep, 0)
	waitAsleep(t, d, abi.EngineCopy)
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "NOP after a stale wake")
	waitAsleep(t, d, abi.EngineCopy)
}

// TestWakeOfNoChannelIsHarmless: Wake with a channel the device does not
// have, or that no engine serves, and WakeEngine with an engine it does not
// have, do nothing — no panic.
func TestWakeOfNoChannelIsHarmless(t *testing.T) {
	d := openTest(t, Config{})
	d.Wake(abi.NumChannels)
	d.Wake(1<<16 - 1)
	d.Wake(abi.NumChannels - 1) // a channel no runlist names: no engine serves it
	d.WakeEngine(abi.NumEngines)
	d.WakeEngine(255)
}

// TestAdaptiveBudgetStaysInBounds feeds the budget rule every kind of gap
// — none, short, around the wake cost and the max, absurdly long — with
// bounds of every shape, and checks that the budget never leaves them.
func TestAdaptiveBudgetStaysInBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gapsOf := []uint64{0, 1, 5_000, 99_999, 100_000, 100_001, 199_999, 200_000, 200_001, 1 << 40, 1<<64 - 1}
	bounds := [][2]uint64{{0, 200_000}, {0, 0}, {10_000, 10_000}, {50_000, 1 << 20}, {0, 1<<64 - 1}, {300, 7}}
	for _, b := range bounds {
		lo, hi := b[0], b[1]
		var gaps []uint64
		for range 2_000 {
			g := gapsOf[rng.IntN(len(gapsOf))]
			if rng.IntN(3) == 0 {
				g = rng.Uint64()
			}
			gaps = append(gaps, g)
			if len(gaps) > adaptiveHistory {
				gaps = gaps[1:]
			}
			budget := bestBudget(gaps, lo, hi)
			if effLo, effHi := lo, max(lo, hi); budget < effLo || budget > effHi {
				t.Fatalf("bounds [%d, %d]: budget %d after gaps %v", lo, hi, budget, gaps)
			}
		}
	}
}

// TestAdaptiveBudgetConverges: for a steady gap under the wake cost the
// budget covers it with half again to spare (spin through, never wake);
// for a steady gap over it, the budget is the min (sleep at once); for a
// mix of the two it covers the short ones.
func TestAdaptiveBudgetConverges(t *testing.T) {
	const lo, hi = 0, 200_000
	steady := func(g uint64) []uint64 {
		gaps := make([]uint64, adaptiveHistory)
		for i := range gaps {
			gaps[i] = g
		}
		return gaps
	}
	for _, tt := range []struct {
		name string
		gaps []uint64
		want uint64
	}{
		{"steady 3 us", steady(3_000), 4_500},
		{"steady 30 us", steady(30_000), 45_000},
		{"steady 90 us, under the wake cost", steady(90_000), 135_000},
		{"steady 150 us, over the wake cost", steady(150_000), lo},
		{"steady 1 ms, over the max", steady(1_000_000), lo},
		{"bimodal 20 us and 1 ms", []uint64{20_000, 1_000_000, 20_000, 1_000_000, 21_000, 1_000_000}, 31_500},
	} {
		if got := bestBudget(tt.gaps, lo, hi); got != tt.want {
			t.Errorf("%s: budget %d; want %d", tt.name, got, tt.want)
		}
	}
}

// TestAdaptiveBudgetHasHeadroom: on gaps that lengthen steadily — each 5%
// longer than the last, a workload slowing down — the budget learnt from
// the last 16 covers the next gap too, and a budget near the max stops at
// it. Without headroom the budget was the last gap, and every next gap
// missed it by 5% and paid a wake.
func TestAdaptiveBudgetHasHeadroom(t *testing.T) {
	const lo, hi = 25_000, 60_000
	var gaps []uint64
	g := 10_000.0
	for range 40 {
		gaps = append(gaps, uint64(g))
		if len(gaps) > adaptiveHistory {
			gaps = gaps[1:]
		}
		g *= 1.05
		next := uint64(g)
		budget := bestBudget(gaps, lo, hi)
		if budget > hi {
			t.Fatalf("after gaps %v: budget %d over the max %d", gaps, budget, hi)
		}
		if next <= hi && budget < next {
			t.Fatalf("after gaps %v: budget %d misses the next gap, %d", gaps, budget, next)
		}
	}
}

// TestAdaptiveLearnsAfterTheCommand: an adaptive engine chooses its next
// budget from a gap that ended in a sleep only once the command that ended
// it has run — the choice weighs every candidate budget over the last gaps,
// work the command must not wait for. The bounds pin the budget (min =
// max), so each choice shows in RegIdleBudgetNow: first 30 µs; then, with
// the bounds moved to 40 µs, the engine sleeps and a long DELAY wakes it.
// While the DELAY runs the engine has not chosen yet (30 µs); once it is
// done and the engine idles, it has (40 µs).
func TestAdaptiveLearnsAfterTheCommand(t *testing.T) {
	d := openTest(t, Config{})
	regs := d.Registers()
	const e = abi.EngineCompute
	c := abi.DefaultChannel(e)
	control, status := abi.EngineControlPage(e), abi.EngineStatusPage(e)
	bounds := func(b uint64) {
		regs.Store(control+abi.RegIdleBudgetMin, b)
		regs.Store(control+abi.RegIdleBudgetMax, b)
	}
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	bounds(30_000)
	setIdle(d, e, abi.IdleAdaptive, 0)
	waitAsleep(t, d, e)
	require.Equal(t, abi.StatusOK, run(t, d, e, abi.Command{Op: abi.OpNop}), "NOP")
	waitAsleep(t, d, e) // asleep again: the NOP's gap has been learnt from
	require.Equal(t, uint64(30_000), regs.Load(status+abi.RegIdleBudgetNow), "RegIdleBudgetNow within bounds of 30 µs")
	bounds(40_000)
	index := regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell)
	(&abi.Command{Op: abi.OpDelay, Value: 1_000_000_000, Seq: index}).Encode(slot(d, c, index)) // 1 s: a loaded machine may keep this goroutine from the check below for a while
	ringDoorbell(d, c, index+1)
	waitFor(t, "the engine awake", func() bool { return !asleep(d, e) })
	time.Sleep(20 * time.Millisecond) // well inside the DELAY
	assert.Equal(t, uint64(30_000), regs.Load(status+abi.RegIdleBudgetNow), "RegIdleBudgetNow while the DELAY that ended the gap runs; want 30000 (the next budget is chosen after the command)")
	waitCompleted(t, d, c, index)
	waitFor(t, "the budget chosen within bounds of 40 µs after the DELAY", func() bool {
		return regs.Load(status+abi.RegIdleBudgetNow) == 40_000
	})
}

// TestASharedEngineGivesWayOnceEachTimeItIdles: an engine of a shared
// device hands its CPU over once each time it runs out of work (giveWay),
// not at every yield of its idle spin, and an in-process device's engine
// never does. The Idle hook counts each engine's idle entries and notes
// how many commands the engine had completed at the latest (RegCommands,
// read on the engine's own goroutine); the swapped yieldThread counts the
// hand-overs. Nothing waits on the clock: a command on each engine, and
// the idle entry that follows it, put both engines in their idle spin with
// that entry's hand-over made (giveWay comes at an idle's first poll, the
// hook at its goIdleAfter-th), and each FILL is followed by its own idle
// entry before the next is sent. (An earlier version slept 5 ms to let the
// engines settle and 200 µs between FILLs; on a loaded machine, under
// -race, an engine that had not gone idle yet, or a FILL sent before the
// one before it had its idle entry, put the counts off by one.)
func TestASharedEngineGivesWayOnceEachTimeItIdles(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run("shared="+strconv.FormatBool(shared), func(t *testing.T) {
			var idles, idleAfter [abi.NumEngines]atomic.Int64 // entries; commands completed at the latest
			var gives atomic.Int64
			yieldThread = func() { gives.Add(1) } // before the engines start: Open's go statements order it
			t.Cleanup(func() { yieldThread = spin.YieldThread })
			d := openTest(t, Config{Shared: shared})
			d.SetHooks(Hooks{Idle: func(e abi.Engine) {
				idleAfter[e].Store(int64(d.Registers().Load(abi.EngineStatusPage(e) + abi.RegCommands)))
				idles[e].Add(1)
			}})
			setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
			setIdle(d, abi.EngineCompute, abi.IdleSpin, 0)
			for _, e := range []abi.Engine{abi.EngineCopy, abi.EngineCompute} {
				require.Equal(t, abi.StatusOK, run(t, d, e, abi.Command{Op: abi.OpNop}))
				waitFor(t, e.String()+" idle after its first command", func() bool { return idleAfter[e].Load() == 1 })
			}
			i0, c0, g0 := idles[abi.EngineCopy].Load(), idles[abi.EngineCompute].Load(), gives.Load()
			const fills = 20
			for k := range int64(fills) {
				require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: 1}))
				waitFor(t, "an idle entry after each FILL", func() bool { return idleAfter[abi.EngineCopy].Load() == k+2 })
			}
			assert.Equal(t, int64(fills), idles[abi.EngineCopy].Load()-i0, "the copy engine's idle entries in %d FILLs, each waited for", fills)
			if !shared {
				time.Sleep(10 * time.Millisecond) // an idle spin's worth of yields
				assert.Zero(t, gives.Load(), "an in-process device's engines gave their CPU away")
				return
			}
			waitFor(t, "a hand-over for each idle entry", func() bool { return gives.Load()-g0 == fills })
			time.Sleep(10 * time.Millisecond) // the engines spin on: no more hand-overs
			assert.Equal(t, int64(fills), gives.Load()-g0, "hand-overs in %d idle entries, after 10 ms more of idle spin", fills)
			assert.Equal(t, c0, idles[abi.EngineCompute].Load(), "the idle compute engine entered idle again")
		})
	}
}
