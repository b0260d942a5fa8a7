package device

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
)

// The watchdog unit's own cost. An idle device burns nothing (stage 7's
// rule), so the unit must not wake while no command runs under a
// watchdog, and while one does it wakes when a limit may have passed, not
// on a period of its own. The unit counts its wakes (Device.wakes).
//
// These tests count wakes over a stretch of time. A loaded machine can
// only delay the unit's timers, so it can only lower the counts: none of
// the bounds below can be broken by load.

// idleSpell is how long the idle tests watch the unit: several times the
// period the unit once woke at (20 ms) with no watchdog set.
const idleSpell = 150 * time.Millisecond

// TestNoWatchdogNoWake: with no watchdog set, the unit never wakes — not
// while the device is idle, not while it runs commands.
func TestNoWatchdogNoWake(t *testing.T) {
	d := openTest(t, Config{})
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCompute, abi.Command{Op: abi.OpDelay, Value: 1_000_000}), "DELAY")
	time.Sleep(idleSpell)
	if got := d.wakes.Load(); got != 0 {
		t.Errorf("watchdog unit woke %d times in %v with no watchdog; want 0", got, idleSpell)
	}
}

// TestAnIdleWatchdogDoesNotWake: with a watchdog set on both engines but
// no command running, the unit does not wake.
func TestAnIdleWatchdogDoesNotWake(t *testing.T) {
	d := openTest(t, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, 10_000_000) // 10 ms
	}
	time.Sleep(idleSpell)
	if got := d.wakes.Load(); got != 0 {
		t.Errorf("watchdog unit woke %d times in %v of idle with a 10 ms watchdog; want 0", got, idleSpell)
	}
}

// TestAWatchdogWakesOncePerLimit: a channel runs a stream of commands,
// each far inside the limit, for five limits. The unit has nothing to do
// but look when a running command could have reached the limit, and when
// one starts after it parked: about once a limit, never more than twice.
// It once woke four times a limit.
func TestAWatchdogWakesOncePerLimit(t *testing.T) {
	// The limit is hangLimit, for its reason: a 2 ms DELAY reaches it
	// only if its engine is kept off a core for the rest, which a loaded
	// machine under the race detector does for 20 ms but not for 200.
	const limit = hangLimit
	const delay = 2_000_000 // 2 ms
	d := openTest(t, Config{})
	e := abi.EngineCompute
	d.regs.Store(abi.EngineControlPage(e)+abi.RegWatchdog, limit)
	start := d.clock.Now()
	for d.clock.Now()-start < 5*limit {
		require.Equal(t, abi.StatusOK, run(t, d, e, abi.Command{Op: abi.OpDelay, Value: delay}), "DELAY")
	}
	wakes, elapsed := d.wakes.Load(), d.clock.Now()-start
	// A wake that finds a command running sleeps until that command's
	// limit, and the command started after the wake before (one seen then
	// would be due now, and acted on); a wake that finds none parks until
	// the next command starts and kicks. So no two wakes a limit apart hold
	// a third between them: at most two a limit, plus the first and last.
	if most := 2 + 2*elapsed/limit; wakes > most {
		t.Errorf("watchdog unit woke %d times in %d cycles under a %d-cycle limit; want at most %d", wakes, elapsed, uint64(limit), most)
	}
}

// TestAShortLimitWakesASleepingUnit: the unit is asleep until a long
// limit on the copy engine when a command starts on the compute engine
// under a short one and hangs. The compute engine must kick the unit, or
// the hang would last the copy engine's limit.
func TestAShortLimitWakesASleepingUnit(t *testing.T) {
	const long = 60_000_000_000 // 60 s
	d := openTest(t, Config{})
	d.regs.Store(abi.EngineControlPage(abi.EngineCopy)+abi.RegWatchdog, long)
	d.regs.Store(abi.EngineControlPage(abi.EngineCompute)+abi.RegWatchdog, hangLimit)
	publish(d, abi.DefaultChannel(abi.EngineCopy), abi.Command{Op: abi.OpDelay, Value: long / 2})
	waitUntil(t, "the copy engine's DELAY to start under its watchdog", func() bool {
		return d.engines[abi.EngineCopy].wd.since.Load() != 0
	})
	waitUntil(t, "the unit to sleep until the copy engine's limit", func() bool { return d.watchNext.Load() > long/2 && d.watchNext.Load() != never })
	start := d.clock.Now()
	require.Equal(t, abi.StatusTimeout, run(t, d, abi.EngineCompute, abi.Command{Op: abi.OpSpin, Value: long}), "OpSpin under a %d-cycle watchdog", uint64(hangLimit))
	// The spin is stopped a limit after its request, which comes a limit
	// after it starts; without the kick the unit would first look at the
	// copy engine's limit, 60 s away. Ten seconds is far from both.
	if took := d.clock.Now() - start; took >= 10_000_000_000 {
		t.Errorf("the hung spin was stopped after %d cycles; want it stopped within two %d-cycle limits, not the copy engine's %d", took, uint64(hangLimit), uint64(long))
	}
}
