package driver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/device"
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
	{"adaptive", IdleAdaptive, 0},
}

// asleep waits until exactly n engines say, in their registers, that they
// are asleep: RegEngineState is EngineAsleep and RegNeedWakeup is set, so
// the next doorbell must wake them. 5 s is orders of magnitude beyond the
// budget plus a scheduling delay, so only an engine that never sleeps (or
// never wakes) fails it.
func asleep(t testing.TB, d *Driver, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, n, sleeping(d), "engines asleep")
	}, 5*time.Second, 100*time.Microsecond)
}

// sleeping counts the engines that say they are asleep.
func sleeping(d *Driver) int {
	n := 0
	for e := range abi.Engine(abi.NumEngines) {
		status := abi.EngineStatusPage(e)
		if d.regs.Load(status+abi.RegEngineState) == abi.EngineAsleep && d.regs.Load(status+abi.RegNeedWakeup) == 1 {
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
	assert.ErrorIs(t, d.SetIdle(abi.NumEngines, Idle{Mode: IdleSpin}), ErrNoEngine, "SetIdle(engine %d)", abi.NumEngines)
	assert.ErrorIs(t, d.SetIdle(abi.EngineCopy, Idle{Mode: IdleAdaptive + 1}), ErrConfig, "SetIdle(mode %d)", IdleAdaptive+1)
	assert.ErrorIs(t, d.SetIdle(abi.EngineCopy, Idle{Mode: IdleAdaptive, BudgetMin: 5, BudgetMax: 4}), ErrConfig, "SetIdle with bounds the wrong way round")
	assert.NoError(t, d.SetIdle(abi.EngineCopy, Idle{Mode: IdleHybrid}), "SetIdle(hybrid, 0)")
	assert.Equal(t, uint64(abi.DefaultIdleBudget), d.regs.Load(abi.EngineControlPage(abi.EngineCopy)+abi.RegIdleBudget), "budget after SetIdle(hybrid, 0); want the default %d", abi.DefaultIdleBudget)
	d.Close()
	assert.ErrorIs(t, d.SetIdle(abi.EngineCopy, Idle{Mode: IdleSpin}), ErrClosed, "SetIdle after Close")
}

func TestConfigSetsTheIdleRegisters(t *testing.T) {
	d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: IdleSleep, Budget: 1234}})
	for e := range abi.Engine(abi.NumEngines) {
		control := abi.EngineControlPage(e)
		mode, budget := IdleMode(d.regs.Load(control+abi.RegIdleMode)), d.regs.Load(control+abi.RegIdleBudget)
		if mode != IdleSleep || budget != 1234 {
			t.Errorf("%v engine: mode %v, budget %d; want sleep, 1234", e, mode, budget)
		}
	}
	dev, err := device.Open(device.Config{MemorySize: 1 << 16})
	require.NoError(t, err)
	defer dev.Close()
	if _, err := New(dev, Config{Idle: Idle{Mode: 9}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "idle mode") {
		t.Errorf("New with idle mode 9 = %v; want ErrConfig naming the idle mode", err)
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
			d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: tt.mode}})
			// The device came out of reset hybrid, and may have gone to
			// sleep before New set the mode: the first doorbell may wake
			// it whatever the mode. Count from the second.
			require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}))
			before := d.Stats().EngineWakes
			for range n {
				if tt.mode == IdleSleep {
					asleep(t, d, 2)
				}
				require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}))
			}
			assert.Equal(t, tt.want, d.Stats().EngineWakes-before, "EngineWakes after %d submits", n)
		})
	}
}

// TestCloseWhileEnginesSleep: Close stops a device whose copy engine is
// asleep and whose compute engine runs a DELAY: the DELAY is cut short
// (StatusAborted), every wait settles, and every engine ends stopped.
//
// Whether Close finds the DELAY running is a race the device decides on
// purpose: a stopping engine starts nothing new (fetch looks for a stop
// before it takes each command), so a Close that comes after the engine
// woke for the DELAY but before it fetched it leaves the DELAY unrun, and
// its wait ends with ErrClosed — also right, and checked as such. (An
// earlier version of this test assumed the engine could not look for a
// stop there, and failed a few times in a thousand under -race.) So the
// scenario is repeated until Close has found the DELAY running; on any
// machine that takes a try or two.
func TestCloseWhileEnginesSleep(t *testing.T) {
	const tries = 20
	for try := 1; try <= tries; try++ {
		ran := false
		t.Run(fmt.Sprintf("try=%d", try), func(t *testing.T) { ran = closeWhileEnginesSleep(t) })
		if t.Failed() || ran {
			return
		}
	}
	t.Fatalf("in %d tries Close never found the DELAY running", tries)
}

// closeWhileEnginesSleep runs the scenario once and reports whether the
// DELAY was running when Close came.
func closeWhileEnginesSleep(t testing.TB) bool {
	d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: IdleSleep}})
	asleep(t, d, 2)
	nop, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpNop}})
	require.NoError(t, err)
	p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
	require.NoError(t, err)
	require.NoError(t, nop.Wait())
	asleep(t, d, 1) // the copy engine sleeps on; compute has woken for the DELAY
	done := make(chan error)
	go func() { done <- p.Wait() }()
	d.Close()
	err = <-done
	ran := p.ch.completed(p.last) // the entry is written only for a command the engine took
	switch {
	case ran && !errors.Is(err, abi.StatusAborted):
		t.Errorf("Wait on a delay cut short by Close = %v; want StatusAborted", err)
	case !ran && !errors.Is(err, ErrClosed):
		t.Errorf("Wait on a delay Close stopped before it ran = %v; want ErrClosed", err)
	}
	// Close returned, so every engine has stopped (leakcheck, at cleanup,
	// proves the goroutines end); none can still be asleep.
	for e := range abi.Engine(abi.NumEngines) {
		if got := d.regs.Load(abi.EngineStatusPage(e) + abi.RegEngineState); got != abi.EngineStopped {
			t.Errorf("%v engine after Close: state %d; want EngineStopped", e, got)
		}
	}
	return ran
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
// device/idle.go, this test fails.) The adaptive mode runs it too: its
// budget moves under the submitters' feet.
func TestNoLostEngineWakeups(t *testing.T) {
	perEngine := 10000
	if testing.Short() {
		perEngine = 2000
	}
	for _, cfg := range idleConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: cfg.mode, Budget: cfg.budget}})
			stressIdle(t, d, perEngine, nil)
		})
	}
	t.Run("switching", func(t *testing.T) {
		d := openWith(t, device.Config{}, Config{Idle: Idle{Mode: IdleHybrid, Budget: stressBudget}})
		stressIdle(t, d, perEngine, func(rng *rand.Rand) {
			c := idleConfigs[rng.IntN(len(idleConfigs))]
			assert.NoError(t, d.SetIdle(abi.Engine(rng.IntN(abi.NumEngines)), Idle{Mode: c.mode, Budget: c.budget}))
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
func stressIdle(t testing.TB, d *Driver, perEngine int, meddle func(*rand.Rand)) {
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
	waitUntil := func(cycle uint64) {
		for polls := 1; int64(d.Now()-cycle) < 0; polls++ {
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
		last := d.Now()
		for i := range perEngine {
			waitUntil(last + gap(rng))
			p, err := d.SubmitBatch(e, []abi.Command{{Op: abi.OpFill, Dst: 64 * uint64(e), Size: 64, Value: uint64(i)}})
			if !assert.NoError(t, err) {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = p.WaitContext(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("lost wake-up: command %d on %v unanswered after 5 s; RegNeedWakeup = %d",
					i, e, d.regs.Load(abi.EngineStatusPage(e)+abi.RegNeedWakeup))
				return
			}
			if !assert.NoError(t, err, "command %d on %v", i, e) {
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
		d.regs.Load(abi.EngineStatusPage(abi.EngineCompute)+abi.RegSleeps), d.regs.Load(abi.EngineStatusPage(abi.EngineCopy)+abi.RegSleeps))
}

// TestAFullRingDoesNotSpin: a submitter that finds the ring full behind a
// long command must not burn a core for as long as the engine takes: after
// its poll budget it sleeps on the channel's fence timeline, where the test
// finds it among the waiters, and it is woken when room appears.
//
// What the test sees proves something only while the DELAY still runs:
// once it ends, the submitter rightly returns, and may sleep again on the
// timeline, waiting for its own NOP. So the DELAY's completion is read
// after the observations; a machine that stalled the test for the whole
// DELAY (a loaded one under -race) makes the attempt void, and the test
// tries again with a DELAY twice as long. A driver that spins is never
// among the waiters while the ring is full, so every attempt is void and
// the last one fails.
func TestAFullRingDoesNotSpin(t *testing.T) {
	const attempts = 4 // DELAYs of 200 ms, 400 ms, 800 ms, 1.6 s
	for attempt := 1; ; attempt++ {
		delay := uint64(200_000_000) << (attempt - 1)
		d := openWith(t, device.Config{RingSize: 2}, Config{PollBudget: 10_000})
		p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: delay}, {Op: abi.OpNop}})
		require.NoError(t, err)
		ch, delayIndex := p.ch, p.reqs[0].index
		done := make(chan error, 1)
		go func() { done <- d.Submit(abi.EngineCompute, abi.Command{Op: abi.OpNop}) }() // needs the DELAY's slot
		var asleep, returned bool
		for !ch.completed(delayIndex) {
			asleep, returned = waitersOf(d, abi.EngineCompute) > 0, len(done) > 0
			if asleep || returned {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		// Read after both observations: if the DELAY still runs, they
		// were made while the ring was full.
		if !ch.completed(delayIndex) {
			if returned {
				t.Fatalf("Submit returned (%v) while the ring was full", <-done)
			}
			assert.NoError(t, <-done, "Submit after room appeared")
			return
		}
		require.NoError(t, <-done, "Submit after room appeared")
		if attempt == attempts {
			t.Fatalf("in %d attempts the submitter waiting for room was never seen asleep on the timeline while a DELAY (up to %v) ran",
				attempts, time.Duration(delay))
		}
		t.Logf("attempt %d: the %v DELAY ended before the test saw the submitter asleep; trying again", attempt, time.Duration(delay))
	}
}
