package device

import (
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/trace"
)

// This file is idle gating: what an engine does when no channel on its
// runlist has work. The driver picks, per engine, in RegIdleMode and its budget
// registers (abi/idle.go): spin, sleep, spin for a budget of cycles and then
// sleep (the default, 50 µs), or spin for a budget learnt from the gaps
// (adaptive.go).
//
// A sleeping engine is parked on a channel, as any goroutine blocked on one
// is: the Go scheduler takes it off its thread, and the thread and the core
// go to whoever needs them. Wake readies it again. This is the Go runtime's
// own parking, not a futex on a thread of the engine's own: a goroutine
// blocked in a raw futex call keeps its P until the runtime's monitor takes
// it back, and the engine goroutines are not locked to threads (see pause
// in engine.go). A wake-up is therefore a goroutine wake: the runtime
// readies the engine on the waker's P, and it runs only when the waker
// yields or another thread steals it. The driver yields at once for that
// reason (driver/idle.go, handoff); even so, the wake costs more than a bare
// futex wake of a sleeping thread, which Baseline/wake measures beside it.
//
// The need-wakeup handshake, engine side (the driver's is in
// driver/idle.go):
//
//	engine (sleep)                           driver (publish, wakeIfIdle)
//	store 1 → RegNeedWakeup                  store tail → RegDoorbell
//	load RegDoorbell: moved? → don't sleep   load RegNeedWakeup: 1? → Wake(c)
//	park until a token arrives               (Wake leaves a token; never blocks)
//	store 0 → RegNeedWakeup
//
// Invariants, per engine:
//   - the engine parks only with RegNeedWakeup = 1 and after a load of
//     RegDoorbell, made after that store, found no command to run;
//   - wakeup holds at most one token, and only Wake and Close put one
//     there: a token sent before the engine parks is not lost but waits in
//     the channel, so the engine's receive returns at once;
//   - a token may be stale (sent for a sleep the engine then skipped on its
//     re-check); it costs one spurious trip round pollLoop, never a command.

// budgetCheckEvery is how many empty polls a budgeted engine makes between
// looks at the clock. Its resolution is a microsecond or so, fine against
// budgets of tens of microseconds; and the first look, which starts the
// budget, comes only after that many polls, so an engine that is handed a
// command soon after its last one never reads the clock for its budget — a
// clock read costs tens of nanoseconds here, and an engine reading it is
// not looking at its doorbell. (The spin's yield cadence, pauseIdle's
// spin.Cadence.Idle, reads it every spin.CheckEvery polls all the same.)
const budgetCheckEvery = 64

// ANCHOR: idle

// idle is what the engine does after an empty poll; polls counts the empty
// polls since the engine last ran a command (1 for the first). It reads the
// driver's choice each time, so a change takes effect at the next poll.
func (e *Engine) idle(polls int) {
	if polls == goIdleAfter {
		e.goIdle()
	}
	if polls == 1 {
		e.publishTLBCounters()
	}
	var budget uint64
	switch abi.IdleMode(e.regs.Load(e.controlPage + abi.RegIdleMode)) {
	case abi.IdleSpin:
		e.pauseIdle(polls)
		return
	case abi.IdleSleep:
		e.sleep()
		return
	case abi.IdleAdaptive:
		budget = e.adaptive.budget
	default: // abi.IdleHybrid; an undefined mode is never stored (the driver checks)
		budget = e.regs.Load(e.controlPage + abi.RegIdleBudget)
	}
	if polls == 1 {
		// The last gap ended in the command just run. If the engine
		// spun through it, an adaptive engine measures it now — the
		// clock is read after the command ran, not between its doorbell
		// and its start; if it ended in a sleep, sleep noted it. Either
		// way the next budget is chosen now (adaptive.go, learn).
		if e.idleSince != 0 && abi.IdleMode(e.regs.Load(e.controlPage+abi.RegIdleMode)) == abi.IdleAdaptive {
			e.adaptive.note(e.dev.clock.Now() - e.idleSince)
		}
		e.idleSince = 0
		e.learn()
	}
	if polls%budgetCheckEvery == 0 {
		now := e.dev.clock.Now()
		if polls == budgetCheckEvery {
			e.idleSince = now
		}
		if now-e.idleSince >= budget {
			e.sleep()
			return
		}
	}
	e.pauseIdle(polls)
}

// ANCHOR_END: idle

// ANCHOR: sleep

// sleep parks the engine until the driver rings its doorbell, the device
// stops, or a stale token wakes it for nothing (then pollLoop finds no
// command and idles again; a budgeted engine whose budget is spent goes
// straight back to sleep, since its idle time counts from its last
// command).
func (e *Engine) sleep() {
	regs := e.regs
	e.learn() // a gap noted at the last wake, if that wake found nothing to run
	// Announce the sleep before the last look at the doorbell. This store
	// pairs with the driver's load of RegNeedWakeup in wakeIfIdle.
	regs.Store(e.statusPage+abi.RegNeedWakeup, 1)
	// The re-check: every channel on the runlist (anyWork, sched.go).
	// Each load of a RegDoorbell pairs with the driver's store of that
	// doorbell. No lost wake-up: the driver stores a channel's tail, then
	// loads the flag; the engine stores the flag, then loads every tail.
	// Go's atomics are sequentially consistent, so for each channel the
	// four accesses fall in one order, and whichever store comes first is
	// seen by the other side's load: either this scan sees the new tail
	// (and the engine does not sleep), or the driver's load sees 1 (and it
	// calls Wake, whose token the receive below gets, however late it
	// parks). A runlist submit and a stop need no flag: the driver stores
	// RegRunlistGen (or RegControl) and then always sends a token, which
	// the receive gets if the scan missed the store.
	if !e.anyWork() && !e.stopRequested() {
		regs.Store(e.statusPage+abi.RegSleeps, regs.Load(e.statusPage+abi.RegSleeps)+1) // the engine is its only writer
		regs.Store(e.statusPage+abi.RegEngineState, abi.EngineAsleep)
		e.idling = true // idle from here on, whatever the count of polls: leaveIdle before the next command
		start := e.dev.clock.Now()
		<-e.wakeup
		woke := e.dev.clock.Now()
		// Awake, and still idle: the engine holds no translation until
		// its next command, and leaveIdle looks at RegInvalGen before
		// that command translates (mmu.go has the argument).
		regs.Store(e.statusPage+abi.RegEngineState, abi.EngineIdle)
		since := e.idleSince // the budget's start, or, in sleep mode, the sleep's
		if since == 0 {
			since = start
		}
		// The gap ended when the doorbell was rung, not when the engine
		// got back on a CPU: the wake call's time, if it came during
		// this sleep (a stale token's would be older).
		end := woke
		if called := e.wokenAt.Load(); called >= start && called <= woke {
			end = called
		}
		// Noted, not yet learnt from: the choice of the next budget
		// waits until the command that ended the gap has run.
		e.adaptive.note(end - since)
		e.idleSince = 0
		if e.trace != nil {
			e.trace.Record(trace.Event{Kind: trace.KindSleep, Start: start, End: woke, Engine: e.id,
				Channel: e.cur.id, Arg: woke - e.wokenAt.Load()})
		}
	}
	// Awake: doorbells from here on need no wake-up call. A driver that
	// still read 1 calls Wake for nothing; its token is a stale one.
	regs.Store(e.statusPage+abi.RegNeedWakeup, 0)
}

// ANCHOR_END: sleep

// ANCHOR: wake

// Wake wakes the engine that serves channel c if it is asleep or on its
// way there; otherwise its only effect is a stale token (a spurious trip
// round the engine's loop). It never blocks, and does nothing for a
// channel the device does not have. It is the driver's half of the
// need-wakeup handshake, called after a doorbell store that found
// RegNeedWakeup set — the call that io_uring_enter(IORING_ENTER_SQ_WAKEUP)
// is for an SQPOLL ring: a store to memory wakes no thread, so waking one
// takes a call.
func (d *Device) Wake(c abi.Channel) {
	if !c.Valid() {
		return
	}
	if owner := d.owner[c].Load(); owner != 0 {
		d.WakeEngine(abi.Engine(owner - 1))
	}
}

// WakeEngine wakes engine e as Wake does, whichever channel it serves: the
// driver calls it after a runlist submit, which the engine must see even if
// asleep. It does nothing for an engine the device does not have.
func (d *Device) WakeEngine(e abi.Engine) {
	if e >= abi.NumEngines {
		return
	}
	eng := d.engines[e]
	if d.cfg.Stepped {
		eng.wakeStepped() // stepped.go: no goroutine to wake; the waker runs the checks
		return
	}
	eng.wokenAt.Store(d.clock.Now()) // for the trace and the adaptive budget: where the gap ended
	select {
	case eng.wakeup <- struct{}{}:
	default: // a token is already waiting: the engine will see this doorbell too
	}
}

// ANCHOR_END: wake

// wakeAll wakes every engine; Close calls it after storing ControlStop, so
// that a sleeping engine sees that too.
func (d *Device) wakeAll() {
	for e := range abi.Engine(abi.NumEngines) {
		d.WakeEngine(e)
	}
}

// resetIdle puts engine e's idle registers at their reset values: hybrid,
// with the default budget and adaptive bounds, and awake.
func (d *Device) resetIdle(e abi.Engine) {
	control, status := abi.EngineControlPage(e), abi.EngineStatusPage(e)
	d.regs.Store(control+abi.RegIdleMode, uint64(abi.IdleHybrid))
	d.regs.Store(control+abi.RegIdleBudget, abi.DefaultIdleBudget)
	d.regs.Store(control+abi.RegIdleBudgetMin, abi.DefaultIdleBudgetMin)
	d.regs.Store(control+abi.RegIdleBudgetMax, abi.DefaultIdleBudgetMax)
	d.regs.Store(status+abi.RegNeedWakeup, 0)
	d.regs.Store(status+abi.RegIdleBudgetNow, abi.DefaultIdleBudget)
}

// goIdleAfter is how many empty polls an engine makes before it says it is
// idle. An engine that finds its next command within a few polls — a
// round trip's — never says it, and so never pays goIdle's and
// leaveIdle's two stores; an Unmap meanwhile waits the few polls until it
// either says it or takes a command, whose start is a safe point.
const goIdleAfter = 64

// ANCHOR: goidle

// goIdle publishes that the engine has run out of commands. An idle engine
// holds no translation, so the driver need not wait for it to acknowledge
// an invalidation (driver/vm.go): the engine stays out of the handshake
// until its next command, and leaveIdle catches up before that command
// translates anything. On a machine with fewer cores than spinning threads,
// an idle engine is often runnable and not running — behind the very thread
// that unmaps — and an Unmap that waited for its acknowledgement would wait
// for the kernel to run it, not for anything the engine holds.
func (e *Engine) goIdle() {
	e.regs.Store(e.statusPage+abi.RegEngineState, abi.EngineIdle)
	e.idling = true
	if h := e.dev.hooks.Load(); h != nil && h.Idle != nil {
		h.Idle(e.id) // hooks.go
	}
}

// leaveIdle is the engine's half of that bargain, before the first command
// after an idle. This store pairs with the driver's load of RegEngineState
// in invalidate, and the load of RegInvalGen in answerInval comes after
// it: if the driver read EngineIdle (or EngineAsleep), the generation it
// stored before that read is seen here. An engine that finds the
// generation moved drops every entry, as one woken from a sleep does: the
// driver did not wait for it, so the range registers may already name a
// later request than the one it missed (mmu.go).
func (e *Engine) leaveIdle() {
	e.regs.Store(e.statusPage+abi.RegEngineState, abi.EngineRunning)
	e.idling = false
	e.answerInval(true)
}

// ANCHOR_END: goidle
