package driver

import (
	"errors"
	"fmt"
	"runtime"

	"softgpu/stage7-idle/abi"
)

// This file is the driver's side of idle gating (stage 7): it programs each
// engine's idle mode and budget, and after every doorbell it wakes the
// engine if the engine has said it needs waking — the submitter's half of
// the need-wakeup handshake (the engine's is in device/idle.go):
//
//	driver (publish, wakeIfIdle)             engine (sleep)
//	store tail → RegDoorbell                 store 1 → RegNeedWakeup
//	load RegNeedWakeup: 1? → dev.Wake(e)     load RegDoorbell: moved? → don't sleep
//
// The driver only reads RegNeedWakeup; the engine is its one writer, and
// clears it itself once awake. So a few doorbells rung while a woken engine
// is getting back on a CPU may each call Wake: each is counted as a wake-up,
// and all but the first cost a non-blocking send that finds a token waiting.

// ANCHOR: wakeifidle
// wakeIfIdle wakes r's engine if it is asleep or on its way to sleep, and
// reports whether it did. publish calls it right after each store to
// RegDoorbell — it must come after it — and, if it woke the engine, hands
// it the thread once it has let go of publishing (handoff, below).
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
func (d *Driver) wakeIfIdle(r *ring) bool {
	if d.regs.Load(r.bank+abi.RegNeedWakeup) == 0 {
		return false
	}
	d.dev.Wake(r.engine)
	d.engineWakes.Add(1)
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
// polls and the engine runs on its thread with no thread wake-up at all:
// that is why a wake here costs about a microsecond, far less than a futex
// wake of a sleeping thread (Baseline/wake). But a submitter that goes on
// computing leaves the engine in its run queue until the other thread gets
// a CPU, and on the measured machine that took milliseconds (the README
// has the numbers: IdleWake/waker=busy). runtime.Gosched puts the
// submitter at the back of the global queue and runs the engine at once;
// the submitter resumes when the engine yields or sleeps, or on the other
// thread, whichever comes first. The publisher yields only after it has let
// go of publishing, so that other submitters' doorbells are not held up
// behind it.
func handoff() { runtime.Gosched() }

// ANCHOR_END: handoff

// IdleMode is what an engine does when it has no work; see abi.IdleMode.
type IdleMode = abi.IdleMode

// ErrIdleMode reports an idle mode this stage does not define.
var ErrIdleMode = errors.New("softgpu: unknown idle mode")

// SetIdle sets engine e's idle mode and, for IdleHybrid, its spin budget in
// cycles (zero means abi.DefaultIdleBudget, 50 µs).
// It takes effect at once: an engine asleep under the old mode is woken to
// read the new one.
func (d *Driver) SetIdle(e abi.Engine, mode IdleMode, budget uint64) error {
	if e >= abi.NumEngines {
		return fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	if !mode.Defined() {
		return fmt.Errorf("%w: %d", ErrIdleMode, uint64(mode))
	}
	if d.closed.Load() {
		return ErrClosed
	}
	if budget == 0 {
		budget = abi.DefaultIdleBudget
	}
	bank := abi.EngineRegs(e)
	// Budget first: an engine that reads the new mode reads a budget at
	// least as new. (A hybrid engine that read the old budget with the new
	// mode sleeps once a little early or late; nothing is lost either way.)
	d.regs.Store(bank+abi.RegIdleBudget, budget)
	d.regs.Store(bank+abi.RegIdleMode, uint64(mode))
	// A sleeping engine reads the registers only when it wakes; wake it,
	// so that "spin" means spin from now on, not from the next doorbell.
	d.dev.Wake(e)
	return nil
}

// The idle modes, under the driver's name for them.
const (
	IdleHybrid = abi.IdleHybrid
	IdleSpin   = abi.IdleSpin
	IdleSleep  = abi.IdleSleep
)
