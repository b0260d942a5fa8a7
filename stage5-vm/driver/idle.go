package driver

import (
	"fmt"
	"runtime"

	"softgpu/stage5-vm/abi"
)

// This file is the driver's side of idle gating: it programs each engine's
// idle mode and budget, and after every doorbell it wakes the engine if the
// engine has said it needs waking — the submitter's half of the
// need-wakeup handshake (the engine's is in device/idle.go):
//
//	driver (publish, wakeIfIdle)             engine (sleep)
//	store tail → RegDoorbell                 store 1 → RegNeedWakeup
//	load RegNeedWakeup: 1? → Wake(c)         load RegDoorbell: moved? → don't sleep
//
// The driver only reads RegNeedWakeup; the engine is its one writer, and
// clears it itself once awake. So a few doorbells rung while a woken engine
// is getting back on a CPU may each call Wake: each is counted as a wake-up,
// and all but the first cost a non-blocking send that finds a token waiting.

// ANCHOR: wakeifidle

// wakeIfIdle wakes the channel's engine if it is asleep or on its way to
// sleep, and reports whether it did. publish calls it right after each
// store to RegDoorbell — it must come after it — and, if it woke the
// engine, hands it the thread once it has let go of publishing (handoff,
// below).
//
// No lost wake-up: this load of RegNeedWakeup comes after the doorbell
// store; the engine stores RegNeedWakeup = 1 before it loads RegDoorbell
// for the last time before it sleeps. Both pairs are sequentially
// consistent atomics, so one of the two loads sees the other side's store:
// either the engine sees the new tail and stays awake, or this load sees 1
// and Wake leaves a token the engine cannot miss. A load of 0 therefore
// proves the engine will see the tail by itself: no call needed, and in
// the common case — a busy or spinning engine — none is made.
//
// Several goroutines may publish one after another; each checks after its
// own store, so whichever doorbell the engine slept through is answered.
func (ch *Channel) wakeIfIdle() bool {
	if ch.regs.Load(ch.engineStatus+abi.RegNeedWakeup) == 0 {
		return false
	}
	ch.wakeEngine(ch.id)
	ch.stats.engineWakes.Add(1)
	return true
}

// ANCHOR_END: wakeifidle

// ANCHOR: handoff

// handoff lets the engine just woken run on this goroutine's thread, now.
//
// Waking a parked goroutine does not start it: the runtime puts it in the
// waker's own run queue (the runnext slot), expecting the waker to block
// soon, and asks an idle thread to come and steal it in case it does not.
// A submitter that waits for its command right away yields within a few
// polls and the engine runs on its thread with no thread wake-up at all.
// That does not make a wake cheap: in the idle record at 885b3ad a fill
// that woke its engine (IdleWake/waker=yield) took longer at the median
// than a bare futex wake of a sleeping thread (Baseline/wake) after every
// gap — 10.7 against 3.0 µs after 30 µs, 9.6 against 4.9 after 300 µs,
// 14.1 against 10.9 after 3 ms — though after the two longer gaps the
// bare wake moved several-fold from pass to pass, so the chapter reads
// them gap by gap. But a submitter
// that goes on computing leaves the engine in its run queue until the
// other thread gets a CPU and steals it, which is far worse: there, with this handoff
// made a no-op, IdleWake/waker=busy took about 100 µs at the median and
// milliseconds at the tail in one run of 300 iterations per gap (commit
// e78828e, in no record); with it, the idle record at 885b3ad reads 8.1,
// 8.3 and 13.4 µs at the median after 30 µs, 300 µs and 3 ms. runtime.Gosched
// puts the submitter at the back of the global queue and runs the engine
// at once; the submitter resumes when the engine yields or sleeps, or on
// the other thread, whichever comes first. The publisher yields only after
// it has let go of publishing, so that other submitters' doorbells are not
// held up behind it.
func handoff() { runtime.Gosched() }

// ANCHOR_END: handoff

// IdleMode is what an engine does when it has no work; see abi.IdleMode.
type IdleMode = abi.IdleMode

// The idle modes, under the driver's name for them.
const (
	IdleHybrid   = abi.IdleHybrid
	IdleSpin     = abi.IdleSpin
	IdleSleep    = abi.IdleSleep
	IdleAdaptive = abi.IdleAdaptive
)

// Idle is an engine's idle configuration.
type Idle struct {
	Mode IdleMode
	// Budget is the hybrid spin in cycles; zero means
	// abi.DefaultIdleBudget (50 µs).
	Budget uint64
	// BudgetMin and BudgetMax bound the adaptive budget, in cycles; zero
	// for both means abi.DefaultIdleBudgetMin and abi.DefaultIdleBudgetMax
	// (25 and 60 µs).
	BudgetMin, BudgetMax uint64
}

// check fills in the defaults and refuses what names nothing, with
// ErrConfig naming the field.
func (c *Idle) check() error {
	if !c.Mode.Defined() {
		return fmt.Errorf("%w: idle mode %d is not an idle mode", ErrConfig, uint64(c.Mode))
	}
	if c.Budget == 0 {
		c.Budget = abi.DefaultIdleBudget
	}
	if c.BudgetMin == 0 && c.BudgetMax == 0 {
		c.BudgetMin, c.BudgetMax = abi.DefaultIdleBudgetMin, abi.DefaultIdleBudgetMax
	}
	if c.BudgetMin > c.BudgetMax {
		return fmt.Errorf("%w: idle budget bounds [%d, %d] are the wrong way round", ErrConfig, c.BudgetMin, c.BudgetMax)
	}
	return nil
}

// SetIdle sets engine e's idle configuration. It takes effect at once: an
// engine asleep under the old mode is woken to read the new one.
func (d *Driver) SetIdle(e abi.Engine, idle Idle) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	if err := idle.check(); err != nil {
		return err
	}
	if d.closed.Load() {
		return ErrClosed
	}
	control := abi.EngineControlPage(e)
	// Budgets first: an engine that reads the new mode reads budgets at
	// least as new. (A budgeted engine that read an old budget with the
	// new mode sleeps once a little early or late; nothing is lost either
	// way.)
	d.regs.Store(control+abi.RegIdleBudget, idle.Budget)
	d.regs.Store(control+abi.RegIdleBudgetMin, idle.BudgetMin)
	d.regs.Store(control+abi.RegIdleBudgetMax, idle.BudgetMax)
	d.regs.Store(control+abi.RegIdleMode, uint64(idle.Mode))
	// A sleeping engine reads the registers only when it wakes; wake it,
	// so that "spin" means spin from now on, not from the next doorbell.
	d.hw.Wake(abi.DefaultChannel(e))
	return nil
}
