package device

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"softgpu/stage8-managed/abi"
)

// This file is the watchdog as a TDR (timeout detection and recovery): what
// stops a command that never reaches a preemption point.
//
// The engine checks its own watchdog at every chunk boundary (boundary in
// sched.go): a command past RegWatchdog stops there with StatusTimeout.
// A command that never reaches a boundary — a shader in an endless loop,
// here OpSpin — is never asked. So the device has a watchdog unit beside
// the engines, a timer of its own (watchdogLoop), that looks at each
// engine's running command, as Windows' TDR and drm_sched's job timeout
// look at the GPU from outside:
//
//	watchdog unit                                engine
//	  the command has run past RegWatchdog:        (running since wd.since)
//	    request preemption (wd.preempt)   ───►     at a boundary: StatusTimeout
//	  still the same command a limit later:
//	    assert reset (wd.reset)           ───►     the spin sees it: engineReset
//	                                               complete the command (StatusTimeout),
//	                                               fault its channel and context,
//	                                               reset the engine (resetEngine)
//
// The reset line is the one thing a hung engine still answers; it is not
// a preemption point (nothing is saved there, the command is lost).
//
// The unit times one more deadline, which the engine sets itself: by when
// a command with no preemption point that the engine has asked to give
// way must have done so (preempttimeout.go). Past it, the unit asserts
// the same reset line.
//
// What the reset loses is what the engine holds: the hung command, its
// live context, its TLB, and its record of which channels have a command
// preempted and saved. What lives in memory survives: each channel's ring
// and indices (on a real GPU its GP_GET/GP_PUT in USERD), and its state
// block and context save area. So the engine rebuilds its record from
// memory — a channel whose state block is marked saved has its command
// back — and every innocent command that was in flight on the engine,
// preempted half-way, is resubmitted from its saved cursor and completes
// once: not rerun from its start, which would apply an ADD32's first
// chunks twice. Every other channel, on this engine or the other, goes on.
//
// Ordering: the engine stores wd.serial, then wd.since, when a command
// starts; the unit loads serial, since, serial, and acts only on a stable
// pair, naming the command by its serial. The engine acts on a request only
// if it names the command it is running (wd.serial), so a request that
// lands after the command finished is ignored by the next.

// engineReset is execute's result for a command stopped by the reset line;
// like preempted it is never a command's status.
const engineReset abi.Status = 1<<31 + 2 // beside preempted (sched.go), and stage 8's stalled

// watch is the state the engine shares with the watchdog unit.
type watch struct {
	serial  atomic.Uint64 // written by the engine: counts commands started or resumed under a watchdog
	since   atomic.Uint64 // written by the engine: 1 + the clock when the running command's time on the engine began; 0 between commands
	preempt atomic.Uint64 // written by the unit: the serial it asks to stop at its next boundary
	reset   atomic.Uint64 // written by the unit: the serial whose engine it resets
	yieldBy atomic.Uint64 // written by the engine: when the running command must have given way, having been asked to (preempttimeout.go); 0 if not asked
}

// never is the unit's next look when it has nothing to watch: it is
// parked until an engine kicks it.
const never = ^uint64(0)

// watchdogLoop is the watchdog unit: until the device stops, it asks each
// engine whose command has run past its limit to stop, and resets the
// engine if the command is still running a limit later; and it resets the
// engine under a command that has not given way by the deadline its
// engine set when it asked it to (preempttimeout.go).
//
// It wakes only when something may be due. Each look (watchScan) acts on
// what is due and returns the next cycle at which anything could be: the
// limit of a running command, or the deadline of a request. The unit
// sleeps until then; with no command running under a watchdog that is
// never, and it sleeps until an engine kicks it. So an idle device, or one
// with no watchdog set, costs nothing here (stage 7's rule), and a stream
// of commands under a watchdog wakes the unit about once a limit.
func (d *Device) watchdogLoop() {
	defer d.running.Done()
	var pending [abi.NumEngines]asked
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next := d.watchScan(&pending)
		for {
			// Ordering: this store of next, then the look again below,
			// pairs with watchStart's store of since, then its load of
			// watchNext, and with askToYield's store of yieldBy, then
			// its load of watchNext. Either the engine sees the unit's
			// next and kicks if it is too late for its command or its
			// deadline, or this look sees the command and the deadline:
			// a command that starts, or is asked to give way, as the unit
			// goes to sleep is never missed.
			d.watchNext.Store(next)
			again := d.watchScan(&pending)
			if again >= next {
				break
			}
			next = again
		}
		var due <-chan time.Time
		if next != never {
			timer.Reset(time.Duration(next - min(next, d.clock.Now()))) // cycles are nanoseconds
			due = timer.C
		}
		select {
		case <-d.watchStop:
			return
		case <-d.watchKick:
		case <-due:
		}
		timer.Stop()
		d.watchNext.Store(0) // looking: an engine that starts now is seen by the look, and need not kick
		d.wakes.Add(1)
	}
}

// asked is a preemption request the unit has made: the command it named,
// and when.
type asked struct{ serial, at uint64 }

// watchScan looks once at each engine: it asks a command that has run past
// its limit to stop, resets the engine under one whose request's deadline
// has passed, or that has not given way by its engine's deadline, and
// returns the cycle of the next limit or deadline, or never.
func (d *Device) watchScan(pending *[abi.NumEngines]asked) uint64 {
	next := never
	for i, e := range d.engines {
		limit := d.regs.Load(e.controlPage + abi.RegWatchdog)
		serial := e.wd.serial.Load()
		since := e.wd.since.Load()
		yieldBy := e.wd.yieldBy.Load() // the command's own, or 0: the engine clears it before the next serial
		if since == 0 || e.wd.serial.Load() != serial {
			continue // between commands; or one just started, and its watchStart (or askToYield) kicks if the unit's next is too late
		}
		now := d.clock.Now()
		if yieldBy != 0 {
			next = min(next, e.forceYield(serial, yieldBy, now)) // preempttimeout.go
		}
		if limit == 0 {
			continue
		}
		switch p := &pending[i]; {
		case p.serial != serial && now-(since-1) < limit:
			next = min(next, since-1+min(limit, never-since)) // its limit
		case p.serial != serial:
			*p = asked{serial, now}
			e.wd.preempt.Store(serial) // a preemption request...
			next = min(next, now+min(limit, never-now))
		case now-p.at < limit:
			next = min(next, p.at+min(limit, never-p.at)) // ...its deadline
		default:
			e.wd.reset.Store(serial)                    // ...whose deadline has passed
			next = min(next, now+min(limit, never-now)) // look again, if the engine is slow to answer the line
		}
	}
	return next
}

// stopWatchdog ends the watchdog unit, once; the last engine to stop calls
// it, and so does Device.stop.
func (d *Device) stopWatchdog() { d.watchOnce.Do(func() { close(d.watchStop) }) }

// watchStart tells the unit the command about to run has been on the
// engine for ran cycles, from now.
func (e *Engine) watchStart(now, ran uint64) {
	e.wd.serial.Add(1)
	e.wd.since.Store(now - ran + 1)
	// Ordering: the store of since above, then this load of watchNext,
	// pairs with the unit's store of watchNext, then its look again
	// (watchdogLoop). The unit parked (never), or asleep past this
	// command's limit, is kicked. With no limit (a command watched only
	// for a preempt timeout) nothing is due until the engine asks the
	// command to give way, and askToYield kicks then.
	if limit := e.watchdog; limit != 0 && e.dev.watchNext.Load() > now-ran+min(limit, never-now) {
		e.kickWatchdog()
	}
}

// kickWatchdog wakes the unit to look now. One token is enough: the unit
// looks at every engine when it wakes.
func (e *Engine) kickWatchdog() {
	select {
	case e.dev.watchKick <- struct{}{}:
	default: // a kick is already pending
	}
}

// watchEnd tells the unit no command is running. It clears the command's
// deadline, if it was asked to give way, before the next command's
// watchStart moves the serial on: a look that reads the next serial reads
// no deadline of this one.
func (e *Engine) watchEnd() {
	e.wd.yieldBy.Store(0)
	e.wd.since.Store(0)
}

// preemptRequested reports whether the unit has asked the running command
// to stop.
func (e *Engine) preemptRequested() bool { return e.wd.preempt.Load() == e.wd.serial.Load() }

// resetAsserted reports whether the unit is resetting the engine under the
// running command.
func (e *Engine) resetAsserted() bool { return e.wd.reset.Load() == e.wd.serial.Load() }

// ANCHOR: spin

// spin is OpSpin: it keeps the engine for the command's cycles, as delay
// does, but never reaches a preemption point — no boundary — as a shader
// stuck in a loop never does. What it still answers is what a hung engine
// answers: the device stopping, an MMU invalidation (it holds no
// translation, so acknowledging is safe), and the reset line. The engine
// around it is not hung: as often as a DELAY reaches a boundary, it asks
// whether the command should give way (askToYield), which it cannot.
func (e *Engine) spin(j *job) abi.Status {
	clock := e.dev.clock
	start := clock.Now() - j.done
	for polls := 1; ; polls++ {
		if j.done = clock.Now() - start; j.done >= j.cmd.Value {
			return abi.StatusOK
		}
		if e.stopRequested() {
			return abi.StatusAborted
		}
		if e.watched() && e.resetAsserted() {
			return engineReset
		}
		e.checkInval()
		if polls%delayBoundaryEvery == 0 {
			e.askToYield() // preempttimeout.go
		}
		e.pause(polls)
	}
}

// ANCHOR_END: spin

// ANCHOR: resetengine

// resetEngine is the engine's reset, after the command the reset line
// stopped has completed with StatusTimeout and its channel has faulted
// (hang): it drops what the engine held — its live context, its TLB, its
// record of saved commands — and rebuilds that record from the state
// blocks in memory, so the innocent commands preempted on it resume.
func (e *Engine) resetEngine() {
	clear(e.context)
	e.flushTLB(func(*tlbEntry) bool { return true })
	now := e.dev.clock.Now()
	for _, c := range e.list {
		c.saved, c.waitSince = false, 0
		if c.faulted || c.state == 0 {
			continue
		}
		st := e.dev.mem[c.state : c.state+abi.ChannelStateSize]
		flags := binary.LittleEndian.Uint64(st[abi.StateFlags:])                      // resume checks the rest
		c.saved = flags == abi.StateSaved || flags == abi.StateSaved|abi.StateFaulted // preempted, or stalled (c.stalled stays: fault.go)
	}
	e.sliceStart = now
	e.regs.Store(e.statusPage+abi.RegResets, e.regs.Load(e.statusPage+abi.RegResets)+1) // the engine is its only writer
}

// ANCHOR_END: resetengine
