package device

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/abi"
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
}

// watchdogIdle is how often the unit looks when no engine has a watchdog:
// often enough that a limit the driver sets is in force within it.
const watchdogIdle = 20 * time.Millisecond

// watchdogLoop is the watchdog unit: until the device stops, every quarter
// of the smallest limit set, it asks each engine whose command has run past
// its limit to stop, and resets the engine if the command is still
// running a limit later.
func (d *Device) watchdogLoop() {
	defer d.running.Done()
	type asked struct{ serial, at uint64 }
	var pending [abi.NumEngines]asked
	timer := time.NewTimer(watchdogIdle)
	defer timer.Stop()
	for {
		select {
		case <-d.watchStop:
			return
		case <-timer.C:
		}
		tick := watchdogIdle
		for i, e := range d.engines {
			limit := d.regs.Load(e.controlPage + abi.RegWatchdog)
			if limit == 0 {
				continue
			}
			tick = min(tick, max(time.Duration(limit)/4, 10*time.Microsecond))
			serial := e.wd.serial.Load()
			since := e.wd.since.Load()
			if since == 0 || e.wd.serial.Load() != serial {
				continue // between commands, or one just started
			}
			now := d.clock.Now()
			if now-(since-1) < limit {
				continue
			}
			switch p := &pending[i]; {
			case p.serial != serial:
				*p = asked{serial, now}
				e.wd.preempt.Store(serial) // a preemption request...
			case now-p.at >= limit:
				e.wd.reset.Store(serial) // ...whose deadline has passed
			}
		}
		timer.Reset(tick)
	}
}

// stopWatchdog ends the watchdog unit, once; the last engine to stop calls
// it, and so does Device.stop.
func (d *Device) stopWatchdog() { d.watchOnce.Do(func() { close(d.watchStop) }) }

// watchStart tells the unit the command about to run has been on the
// engine for ran cycles, from now.
func (e *Engine) watchStart(now, ran uint64) {
	e.wd.serial.Add(1)
	e.wd.since.Store(now - ran + 1)
}

// watchEnd tells the unit no command is running.
func (e *Engine) watchEnd() { e.wd.since.Store(0) }

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
// translation, so acknowledging is safe), and the reset line.
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
		if e.timed && e.watchdog != 0 && e.resetAsserted() {
			return engineReset
		}
		e.checkInval()
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
