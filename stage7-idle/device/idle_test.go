package device

import (
	"strings"
	"testing"
	"time"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/internal/leakcheck"
)

// ringDoorbell is the driver's doorbell as these tests play it: store the
// tail, then wake the engine if it said it needs waking (driver/idle.go,
// wakeIfIdle, is the real one). Every doorbell in this package's tests
// goes through it, since from stage 7 on an engine may be asleep.
func ringDoorbell(d *Device, e abi.Engine, tail uint64) {
	bank := abi.EngineRegs(e)
	d.Registers().Store(bank+abi.RegDoorbell, tail)
	if d.Registers().Load(bank+abi.RegNeedWakeup) != 0 {
		d.Wake(e)
	}
}

// setIdle programs engine e's idle registers as the driver's SetIdle does.
func setIdle(d *Device, e abi.Engine, mode abi.IdleMode, budget uint64) {
	bank := abi.EngineRegs(e)
	d.Registers().Store(bank+abi.RegIdleBudget, budget)
	d.Registers().Store(bank+abi.RegIdleMode, uint64(mode))
	d.Wake(e)
}

func sleeps(d *Device, e abi.Engine) uint64 {
	return d.Registers().Load(abi.EngineRegs(e) + abi.RegSleeps)
}

// waitAsleep waits until n engine goroutines are parked in sleep. An engine
// told to sleep gets there within its budget plus a scheduling delay; 5 s is
// that many orders of magnitude over, so only an engine that never sleeps
// fails it.
//
// Parked means blocked on its wake-up channel ("[chan receive]"), not just
// inside sleep: a goroutine blocked on a receive found the channel empty, so
// no stale token is waiting, and RegNeedWakeup stays 1 until a Wake — the
// next doorbell is sure to find the engine asleep.
func waitAsleep(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for parked() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d engines asleep after 5 s; want %d", parked(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// parked counts the engine goroutines blocked in sleep's receive.
func parked() int {
	n := 0
	for _, g := range leakcheck.RunningIn("(*Engine).sleep") {
		if header, _, _ := strings.Cut(g, "\n"); strings.Contains(header, "[chan receive") {
			n++
		}
	}
	return n
}

func TestIdleRegistersResetToHybrid(t *testing.T) {
	d := openTest(t, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		bank := abi.EngineRegs(e)
		mode, budget := abi.IdleMode(d.Registers().Load(bank+abi.RegIdleMode)), d.Registers().Load(bank+abi.RegIdleBudget)
		if mode != abi.IdleHybrid || budget != abi.DefaultIdleBudget {
			t.Errorf("%v engine at reset: mode %v, budget %d; want hybrid, %d", e, mode, budget, abi.DefaultIdleBudget)
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
			setIdle(d, abi.EngineCompute, abi.IdleSpin, 0) // keep the other engine out of RunningIn
			// The first command runs after the engine has read the new
			// mode (setIdle woke it, if a sleep under the old one had
			// begun), so sleeps counted from here are the new mode's.
			if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}); st != abi.StatusOK {
				t.Fatalf("NOP = %v", st)
			}
			before := sleeps(d, abi.EngineCopy)
			for i := range 5 {
				if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: uint64(i)}); st != abi.StatusOK {
					t.Fatalf("fill %d = %v", i, st)
				}
				time.Sleep(tt.gap)
				if tt.sleeps {
					waitAsleep(t, 1)
				}
			}
			slept := sleeps(d, abi.EngineCopy) - before
			if tt.sleeps && slept < 5 {
				t.Errorf("engine slept %d times in 5 gaps; want at least 5", slept)
			}
			if !tt.sleeps && slept != 0 {
				t.Errorf("engine slept %d times; want 0", slept)
			}
			if d.Memory()[63] != 4 {
				t.Errorf("memory after the last fill = %d; want 4", d.Memory()[63])
			}
		})
	}
}

// TestSetIdleWakesASleeper switches a sleeping engine to spin: it must leave
// sleep at once, not at the next doorbell.
func TestSetIdleWakesASleeper(t *testing.T) {
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCompute, abi.IdleSleep, 0)
	setIdle(d, abi.EngineCopy, abi.IdleSleep, 0)
	waitAsleep(t, 2)
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	waitAsleep(t, 1)
	setIdle(d, abi.EngineCompute, abi.IdleSpin, 0)
	waitAsleep(t, 0)
}

// TestCloseWakesSleepingEngines closes a device whose engines are both
// asleep: Close must return, and leakcheck must find no engine left.
func TestCloseWakesSleepingEngines(t *testing.T) {
	d := openTest(t, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		setIdle(d, e, abi.IdleSleep, 0)
	}
	waitAsleep(t, 2)
	d.Close() // the cleanup's Close is then a no-op; leakcheck runs after it
	// Close returned, so every engine has left pollLoop (leakcheck, at
	// cleanup, proves the goroutines end); none can still be asleep.
	if n := len(leakcheck.RunningIn("(*Engine).sleep")); n != 0 {
		t.Errorf("%d engines still asleep after Close returned", n)
	}
}

// TestStaleWakeIsHarmless wakes an engine that is not asleep, then lets it
// sleep: the token left behind sends it once round its loop for nothing,
// and it goes back to sleep; commands before and after run.
func TestStaleWakeIsHarmless(t *testing.T) {
	d := openTest(t, Config{})
	setIdle(d, abi.EngineCompute, abi.IdleSpin, 0)
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	d.Wake(abi.EngineCopy) // a token for an engine that is spinning
	setIdle(d, abi.EngineCopy, abi.IdleSleep, 0)
	waitAsleep(t, 1)
	if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop}); st != abi.StatusOK {
		t.Fatalf("NOP after a stale wake = %v", st)
	}
	waitAsleep(t, 1)
}
