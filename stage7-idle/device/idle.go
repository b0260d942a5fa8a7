package device

import (
	"softgpu/stage7-idle/abi"
)

// This file is idle gating (stage 7): what an engine does when its ring is
// empty. Until stage 4 it spun, a core per engine whether or not anybody
// submitted; now the driver picks, per engine, in RegIdleMode and
// RegIdleBudget (abi/idle.go): spin, sleep, or spin for a budget of cycles
// and then sleep (the default, 50 µs).
//
// A sleeping engine is parked on a channel, as any goroutine blocked on one
// is: the Go scheduler takes it off its thread, and the thread and the core
// go to whoever needs them. Device.Wake readies it again. This is the Go
// runtime's own parking, not a futex on a thread of the engine's own: a
// goroutine blocked in a raw futex call keeps its P until the runtime's
// monitor takes it back (DESIGN §9), and the engine goroutines are not
// locked to threads (see pause in engine.go). What a wake-up costs here, and
// what was tried to make it cheaper, is in the README.
//
// The need-wakeup handshake, engine side (the driver's is in
// driver/idle.go):
//
//	engine (sleep)                           driver (publish, wakeIfIdle)
//	store 1 → RegNeedWakeup                  store tail → RegDoorbell
//	load RegDoorbell: moved? → don't sleep   load RegNeedWakeup: 1? → Wake(e)
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

// ANCHOR: idle
// idle is what the engine does after an empty poll; polls counts the empty
// polls since the engine last ran a command (1 for the first). It reads the
// driver's choice each time, so a change takes effect at the next poll.
func (e *Engine) idle(polls int) {
	regs := e.dev.regs
	if polls == 1 {
		e.idleSince = e.dev.clock.Now()
	}
	switch abi.IdleMode(regs.Load(e.bank + abi.RegIdleMode)) {
	case abi.IdleSpin:
		e.pause(polls)
	case abi.IdleSleep:
		e.sleep()
	default: // abi.IdleHybrid; an undefined mode is never stored (the driver checks)
		// The clock is read every budgetCheckEvery polls, not on every
		// one: a poll is a few nanoseconds, a clock read tens.
		if polls%budgetCheckEvery == 0 && e.dev.clock.Now()-e.idleSince >= regs.Load(e.bank+abi.RegIdleBudget) {
			e.sleep()
			return
		}
		e.pause(polls)
	}
}

// budgetCheckEvery is how many empty polls a hybrid engine makes between
// looks at the clock. Its resolution is a few hundred nanoseconds, fine
// against budgets of microseconds.
const budgetCheckEvery = 16

// ANCHOR_END: idle

// ANCHOR: sleep
// sleep parks the engine until the driver rings its doorbell, Close stops
// the device, or a stale token wakes it for nothing (then pollLoop finds no
// command and idles again; a hybrid engine whose budget is spent goes
// straight back to sleep, since its idle time counts from its last command).
func (e *Engine) sleep() {
	regs := e.dev.regs
	// Announce the sleep before the last look at the doorbell. This store
	// pairs with the driver's load of RegNeedWakeup in wakeIfIdle.
	regs.Store(e.bank+abi.RegNeedWakeup, 1)
	// The re-check. This load pairs with the driver's store of
	// RegDoorbell. No lost wake-up: the driver stores the tail, then loads
	// the flag; the engine stores the flag, then loads the tail. Go's
	// atomics are sequentially consistent, so the four accesses fall in
	// one order, and whichever store comes first is seen by the other
	// side's load: either this load sees the new tail (and the engine does
	// not sleep), or the driver's load sees 1 (and it calls Wake, whose
	// token the receive below gets, however late it parks). Close stores
	// stopping, then sends a token to every engine, so the same holds for
	// stopping.
	if regs.Load(e.bank+abi.RegDoorbell) == e.head && !e.dev.stopping.Load() {
		regs.Store(e.bank+abi.RegSleeps, regs.Load(e.bank+abi.RegSleeps)+1) // the engine is its only writer
		<-e.wakeup
	}
	// Awake: doorbells from here on need no wake-up call. A driver that
	// still read 1 calls Wake for nothing; its token is a stale one.
	regs.Store(e.bank+abi.RegNeedWakeup, 0)
}

// ANCHOR_END: sleep

// ANCHOR: wake
// Wake wakes engine e if it is asleep or on its way there; otherwise its
// only effect is a stale token (a spurious trip round the engine's loop).
// It never blocks. It is the driver's half of the need-wakeup handshake,
// called after a doorbell store that found RegNeedWakeup set — the call that
// io_uring_enter(IORING_ENTER_SQ_WAKEUP) is for an SQPOLL ring: a store to
// memory wakes no thread, so waking one takes a call.
func (d *Device) Wake(e abi.Engine) {
	select {
	case d.engines[e].wakeup <- struct{}{}:
	default: // a token is already waiting: the engine will see this doorbell too
	}
}

// ANCHOR_END: wake

// wakeAll wakes every engine; Close calls it after storing stopping, so that
// a sleeping engine sees that too.
func (d *Device) wakeAll() {
	for e := range abi.Engine(abi.NumEngines) {
		d.Wake(e)
	}
}

// resetIdle puts engine e's idle registers at their reset values: hybrid,
// with the default budget, and awake.
func (d *Device) resetIdle(e abi.Engine) {
	bank := abi.EngineRegs(e)
	d.regs.Store(bank+abi.RegIdleMode, uint64(abi.IdleHybrid))
	d.regs.Store(bank+abi.RegIdleBudget, abi.DefaultIdleBudget)
	d.regs.Store(bank+abi.RegNeedWakeup, 0)
}
