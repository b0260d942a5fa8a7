package driver

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"softgpu/stage7-idle/abi"
	"softgpu/stage7-idle/device"
	"softgpu/stage7-idle/internal/leakcheck"
)

// idleConfigs are the idle configurations every idle test runs under. The
// hybrid budget is short, so that the tests' gaps cross it often.
var idleConfigs = []struct {
	name   string
	mode   IdleMode
	budget uint64
}{
	{"spin", IdleSpin, 0},
	{"sleep", IdleSleep, 0},
	{"hybrid5us", IdleHybrid, stressBudget},
}

// asleep waits until n engine goroutines are parked in sleep; 5 s is orders
// of magnitude beyond the budget plus a scheduling delay, so only an engine
// that never sleeps fails it.
//
// Parked means blocked on its wake-up channel ("[chan receive]"), not just
// inside sleep: a goroutine blocked on a receive found the channel empty, so
// no stale token is waiting, and RegNeedWakeup stays 1 until a Wake — the
// next doorbell is sure to find the engine asleep.
func asleep(t *testing.T, n int) {
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

// idleFor lets d pass without touching the device. time.Sleep rounds short
// gaps up to the runtime's timer resolution, so poll the clock, yielding.
func idleFor(d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		runtime.Gosched()
	}
}

func TestSetIdleChecksItsArguments(t *testing.T) {
	d := openTest(t)
	if err := d.SetIdle(abi.NumEngines, IdleSpin, 0); !errors.Is(err, ErrNoEngine) {
		t.Errorf("SetIdle(engine %d) = %v; want ErrNoEngine", abi.NumEngines, err)
	}
	if err := d.SetIdle(abi.EngineCopy, IdleSleep+1, 0); !errors.Is(err, ErrIdleMode) {
		t.Errorf("SetIdle(mode %d) = %v; want ErrIdleMode", IdleSleep+1, err)
	}
	if err := d.SetIdle(abi.EngineCopy, IdleHybrid, 0); err != nil {
		t.Errorf("SetIdle(hybrid, 0) = %v; want nil", err)
	}
	if got := d.regs.Load(abi.EngineRegs(abi.EngineCopy) + abi.RegIdleBudget); got != abi.DefaultIdleBudget {
		t.Errorf("budget after SetIdle(hybrid, 0) = %d; want the default %d", got, abi.DefaultIdleBudget)
	}
	d.Close()
	if err := d.SetIdle(abi.EngineCopy, IdleSpin, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetIdle after Close = %v; want ErrClosed", err)
	}
}

func TestConfigSetsTheIdleRegisters(t *testing.T) {
	d := openWith(t, device.Config{}, Config{Idle: IdleSleep, IdleBudget: 1234})
	for e := range abi.Engine(abi.NumEngines) {
		bank := abi.EngineRegs(e)
		mode, budget := IdleMode(d.regs.Load(bank+abi.RegIdleMode)), d.regs.Load(bank+abi.RegIdleBudget)
		if mode != IdleSleep || budget != 1234 {
			t.Errorf("%v engine: mode %v, budget %d; want sleep, 1234", e, mode, budget)
		}
	}
}

// TestWakesAreCounted submits to a sleeping engine and to a spinning one:
// each doorbell that finds its engine asleep wakes it, exactly once, and a
// doorbell to a spinning engine never makes the call.
func TestWakesAreCounted(t *testing.T) {
	const n = 5
	for _, tt := range []struct {
		mode IdleMode
		want uint64
	}{{IdleSleep, n}, {IdleSpin, 0}} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Idle: tt.mode})
			// The device came out of reset hybrid, and may have gone to
			// sleep before New set the mode: the first doorbell may wake
			// it whatever the mode. Count from the second.
			if err := d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}); err != nil {
				t.Fatal(err)
			}
			before := d.Stats().EngineWakes
			for range n {
				if tt.mode == IdleSleep {
					asleep(t, 2)
				}
				if err := d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}); err != nil {
					t.Fatal(err)
				}
			}
			if got := d.Stats().EngineWakes - before; got != tt.want {
				t.Errorf("EngineWakes after %d submits = %d; want %d", n, got, tt.want)
			}
		})
	}
}

// TestCloseWhileEnginesSleep closes a driver whose engines are asleep, with
// and without a waiter blocked on a long command on the other engine.
func TestCloseWhileEnginesSleep(t *testing.T) {
	d := openWith(t, device.Config{}, Config{Idle: IdleSleep})
	asleep(t, 2)
	p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
	if err != nil {
		t.Fatal(err)
	}
	asleep(t, 1) // the copy engine sleeps on; compute runs the delay
	done := make(chan error)
	go func() { done <- p.Wait() }()
	d.Close()
	if err := <-done; !errors.Is(err, abi.StatusAborted) {
		t.Errorf("Wait on a delay cut short by Close = %v; want StatusAborted", err)
	}
	// Close returned, so every engine has left pollLoop (leakcheck, at
	// cleanup, proves the goroutines end); none can still be asleep.
	if n := len(leakcheck.RunningIn("(*Engine).sleep")); n != 0 {
		t.Errorf("%d engines still asleep after Close returned", n)
	}
}

// ANCHOR: nolostwakeups
// TestNoLostEngineWakeups is the evidence for the need-wakeup handshake. In
// every idle mode, and with the modes switched at random meanwhile, one
// submitter per engine submits a command, waits for it, and lets a gap pass
// before the next. Most gaps are drawn across the hybrid budget, where a
// hybrid engine stops spinning and goes to sleep: the moment a doorbell can
// slip in between the engine's last look at the ring and its need-wakeup
// flag. The rest are zero (the engine goes to sleep right after the
// command) or well past the budget (it is fast asleep).
//
// Each engine has a single submitter, so a lost wake-up is never rescued by
// someone else's doorbell: the command waits forever. Each wait carries a
// 5 s watchdog. A command is answered within the budget plus one wake-up —
// tens of microseconds, milliseconds on a loaded machine under -race — so
// the watchdog cannot fire for slowness, only for a command left in the ring
// of an engine that sleeps and will never be woken. (With the engine's
// re-check of the doorbell after it sets RegNeedWakeup removed, in
// device/idle.go, this test fails.)
func TestNoLostEngineWakeups(t *testing.T) {
	perEngine := 10000
	if testing.Short() {
		perEngine = 2000
	}
	for _, cfg := range idleConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Idle: cfg.mode, IdleBudget: cfg.budget})
			stressIdle(t, d, perEngine, nil)
		})
	}
	t.Run("switching", func(t *testing.T) {
		d := openWith(t, device.Config{}, Config{Idle: IdleHybrid, IdleBudget: stressBudget})
		stressIdle(t, d, perEngine, func(rng *rand.Rand) {
			c := idleConfigs[rng.IntN(len(idleConfigs))]
			if err := d.SetIdle(abi.Engine(rng.IntN(abi.NumEngines)), c.mode, c.budget); err != nil {
				t.Error(err)
			}
		})
	})
}

// ANCHOR_END: nolostwakeups

// stressBudget is the hybrid budget of the stress test, in cycles. It is
// short, so that a run crosses it thousands of times in a fraction of a
// second.
const stressBudget = 5_000

// stressIdle runs the submitters of TestNoLostEngineWakeups; if meddle is
// not nil, a goroutine calls it every few tens of microseconds until they
// are done.
func stressIdle(t *testing.T, d *Driver, perEngine int, meddle func(*rand.Rand)) {
	// Gaps are measured on the device clock from the engine's previous
	// completion (its fence stamp), which is where its budget starts, not
	// from when the submitter noticed it. So a gap just past the budget
	// lands a doorbell close to the moment the engine gives up spinning:
	// within a few hundred cycles after the budget, the engine looks at
	// the clock (every budgetCheckEvery polls), sets its flag and sleeps.
	gap := func(r *rand.Rand) uint64 {
		switch r.IntN(8) {
		case 0:
			return 0 // the sleep mode's moment: right after the command
		case 1:
			return 4 * stressBudget // fast asleep
		}
		return stressBudget - 200 + r.Uint64N(1000) // across the budget
	}
	clock := d.dev.Clock()
	waitUntil := func(cycle uint64) {
		for polls := 1; int64(clock.Now()-cycle) < 0; polls++ {
			if polls%16 == 0 {
				runtime.Gosched()
			}
		}
	}
	// One engine at a time: the submitter and its engine then each have a
	// core of the two, so the engine gives up spinning when its budget
	// says, not when the scheduler next gets round to it, and the
	// doorbells drawn across that moment really land around it.
	submit := func(e abi.Engine) {
		rng := rand.New(rand.NewPCG(uint64(e), 9))
		last := clock.Now()
		for i := range perEngine {
			waitUntil(last + gap(rng))
			p, err := d.SubmitBatch(e, []abi.Command{{Op: abi.OpFill, Dst: 64 * uint64(e), Size: 64, Value: uint64(i)}})
			if err != nil {
				t.Error(err)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = p.WaitContext(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("lost wake-up: command %d on %v unanswered after 5 s; RegNeedWakeup = %d",
					i, e, d.regs.Load(abi.EngineRegs(e)+abi.RegNeedWakeup))
				return
			}
			if err != nil {
				t.Errorf("command %d on %v: %v", i, e, err)
				return
			}
			last = p.Fence().SignaledAt()
		}
	}
	var stop atomic.Bool
	var meddler sync.WaitGroup
	if meddle != nil {
		meddler.Go(func() {
			rng := rand.New(rand.NewPCG(99, 9))
			for !stop.Load() {
				meddle(rng)
				idleFor(time.Duration(rng.Int64N(8 * stressBudget)))
			}
		})
	}
	for e := range abi.Engine(abi.NumEngines) {
		submit(e)
	}
	stop.Store(true)
	meddler.Wait()
	t.Logf("%d engine wakes; sleeps: compute %d, copy %d", d.Stats().EngineWakes,
		d.regs.Load(abi.EngineRegs(abi.EngineCompute)+abi.RegSleeps), d.regs.Load(abi.EngineRegs(abi.EngineCopy)+abi.RegSleeps))
}
