package device

// This file is forced preemption: what takes the engine back from a
// command that does not give it up when the engine asks.
//
// The engine asks at a command's boundaries whether its channel should
// give the engine up (switchWanted, sched.go): a channel of higher
// priority has work, the slice is spent while one of equal priority
// waits, a waiting channel has aged past every priority, or the driver
// has submitted a runlist. A command at a boundary answers at once: it is
// saved, and another channel runs. A command with no boundary — OpSpin, a
// shader in an endless loop — cannot answer. Left alone, it would keep
// the engine until its cycles ran out, or until the watchdog reset the
// engine two limits after it began: every channel that wanted the engine
// would wait that long, and a SPIN that ended before the reset would never
// be judged — a stranger's channels of SPINs of one and a half limits
// each could hold an engine round after round and never count a reset
// (stage 9's hang bars judge a user by its resets; the red team's
// finding F1).
//
// So while a command spins, the engine goes on asking, as often as a
// DELAY reaches a boundary. The first time the answer is yes, it sets the
// command a deadline, RegPreemptTimeout from then, and posts it for the
// watchdog unit (wd.yieldBy). If the same command is still running at the
// deadline, the unit asserts the reset line under it, and the engine
// resets as it does for the watchdog (watchdog.go): the command completes
// with StatusTimeout, its channel and its context are faulted, the reset
// is counted (RegResets, RegTimeouts; from stage 9 in the context's
// RegCtxResets too), and the innocent commands preempted on the engine
// resume from their saved state:
//
//	engine                                       watchdog unit
//	  spin: a switch is wanted (switchWanted)
//	    post the deadline (wd.yieldBy)    ───►     the same command still running at it:
//	                                                 assert reset (wd.reset)
//	  spin sees the line: engineReset     ◄───
//	  complete (StatusTimeout), fault the
//	  channel and context, reset the engine
//
// This is i915's forced preemption ("drm/i915/execlists: Force
// preemption", 2019): when the scheduler asks the engine to switch
// contexts and the running one has not reached an arbitration point within
// preempt_timeout_ms (640 ms by default), the engine is reset under it and
// that context is blamed.
//
// The deadline belongs to the command it was set for. It is posted in the
// command's watch, which names the command by its serial; the engine
// clears it when the command stops running — completed, preempted at a
// boundary, or stopped (watchEnd) — and the unit resets under that serial
// alone, which a later command ignores (resetAsserted). So a command that
// ends in time, or is stopped otherwise, is never reset for it, and a
// command that takes the engine after it is judged by its own deadline
// only. i915 learnt this the hard way ("drm/i915/gt: Restrict forced
// preemption to the active context", 2022): its timer, armed while one
// context ran, could fire just after that context had given way to the
// next, and the reset blamed the next one; since then it records which
// request was running when it asked, and resets only under that one.
//
// A command with boundaries is never given a deadline: the engine asks it
// at a boundary, where it answers. On a real engine the request comes at
// any moment and the command answers at its next arbitration point, so a
// preempt timeout shorter than the gap between two resets commands that
// would have given way, only later; here a chunk takes microseconds, and
// no timeout is that short. Nor is a command the engine could not save
// (its channel has no state block, or it is the only channel on its
// engine's runlist) ever asked to give way.
//
// Ordering: askToYield stores wd.yieldBy, then loads the unit's
// watchNext; the unit stores watchNext, then looks again (watchdogLoop).
// Either the engine sees that the unit would look too late and kicks it,
// or the unit's look sees the deadline — as for watchStart's command.

// askToYield is the engine's question to a command with no boundary
// (spin): the first time the engine should switch away from it, it sets
// the command's deadline, a preempt timeout from now, and kicks the unit
// if the unit would look only later. A deadline, once set, stands until
// the command stops running, even if no switch is wanted by then: the
// request has been made.
func (e *Engine) askToYield() {
	if e.preemptTimeout == 0 || e.wd.yieldBy.Load() != 0 {
		return // no preempt timeout; or asked already (the engine is the word's only writer)
	}
	now := e.dev.clock.Now()
	if !e.switchWanted(now) {
		return
	}
	by := now + min(e.preemptTimeout, never-now)
	e.wd.yieldBy.Store(by)
	// Ordering: this store, then the load of watchNext below, pairs with
	// the unit's store of watchNext, then its look again (watchdogLoop).
	if e.dev.watchNext.Load() > by {
		e.kickWatchdog()
	}
}

// forceYield is the unit's look at engine e, whose running command,
// serial, was asked to give way by yieldBy: once that has passed, the
// unit asserts the reset line under the command. It returns when to look
// next: the deadline, or never once the line is asserted — the line stays
// asserted for that command until the engine answers it, and the next
// command's watchStart or askToYield kicks the unit when it must look.
func (e *Engine) forceYield(serial, yieldBy, now uint64) uint64 {
	if now < yieldBy {
		return yieldBy
	}
	e.wd.reset.Store(serial)
	return never
}
