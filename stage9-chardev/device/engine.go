package device

import (
	"runtime"
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/spin"
	"softgpu/stage9-chardev/mmio"
	"softgpu/stage9-chardev/trace"
)

// Engine is one of the device's engines: a goroutine that serves the
// channels on its runlist (sched.go), executing the commands they announce.
type Engine struct {
	dev   *Device
	id    abi.Engine
	regs  *mmio.Registers
	trace *trace.Buffer // nil when tracing is off

	statusPage  uint64 // abi.EngineStatusPage(id)
	commands    uint64 // commands completed: RegCommands
	controlPage uint64 // abi.EngineControlPage(id)
	held        uint64 // window entries the running command holds; RegDMAHeld follows it (private; see dma.go)

	ringSize uint64
	mask     uint64 // ringSize-1: index & mask is an entry

	yield  spin.Cadence // when pause yields; the engine goroutine's own
	walker Walker       // how the MMU extends a translation past its page (walker.go)

	// Private to the engine goroutine.
	cur        *chanState // the channel being served: fetch, complete and signal work on it
	job        job        // the command being executed (execute.go)
	sched                 // the runlist and the scheduler's state (sched.go)
	replaySeen uint64     // the last RegFaultReplay handled (fault.go)
	burst      []uint64   // burst.go: the pages of the last fault burst (private scratch)

	wakeup    chan struct{} // idle.go: a sleeping engine waits for a token here; buffered, one token
	idleSince uint64        // idle.go: clock when the budget started, at its first look; 0 when not started (private)
	adaptive  adaptive      // adaptive.go: the learnt budget (private)
	mmu       mmu           // mmu.go: the TLB and the context translated in (private)
	idling    bool          // idle.go: RegEngineState is EngineIdle or EngineAsleep (private)
	context   []byte        // engctx.go: the live engine context, Config.ContextSize bytes (private)
	wd        watch         // watchdog.go: what the watchdog unit sees of the running command, and its requests
	wokenAt   atomic.Uint64 // idle.go: when Wake was last called
	kick      kick          // kick.go: how a shared device's engine sleeps, and is woken from another process
}

func newEngine(d *Device, id abi.Engine) *Engine {
	e := &Engine{dev: d, id: id, regs: d.regs, trace: d.trace, statusPage: abi.EngineStatusPage(id),
		ringSize: d.cfg.RingSize, mask: d.cfg.RingSize - 1, yield: spin.NewCadence(d.cfg.YieldEvery), walker: d.cfg.Walker,
		controlPage: abi.EngineControlPage(id), wakeup: make(chan struct{}, 1), adaptive: adaptive{budget: abi.DefaultIdleBudget},
		context: make([]byte, d.cfg.ContextSize)}
	e.resetRunlist()
	return e
}

// ANCHOR: pollloop

// pollLoop is the engine's whole life: take a runlist the driver has
// submitted, choose the next command (sched.go), execute it, publish its
// completion — or save it, if it was preempted; when no channel has work,
// idle; until the driver (or Close) stops the device. A ring instead of a
// mailbox, sleeping instead of spinning, or many channels instead of one,
// replaces the pieces, not the loop.
func (e *Engine) pollLoop() {
	defer e.dev.running.Done()
	defer e.stop()
	for polls := 1; ; polls++ {
		if e.step() {
			polls = 0
			continue
		}
		if e.stopRequested() {
			return
		}
		e.idle(polls)
	}
}

// step runs the next command, if there is one, after taking any runlist
// the driver has submitted and serving any replay it has asked for
// (fault.go): it chooses the command (sched.go), executes it, and
// publishes its completion, or saves it if it was preempted or stalled
// on a fault. It reports whether there was one. It is the whole of the engine's work for a command; pollLoop
// adds the waiting between commands, and a stepped device (stepped.go)
// calls it on the driver's goroutine instead.
func (e *Engine) step() bool {
	e.checkRunlist()
	e.checkReplay()
	if !e.next() {
		return false
	}
	if e.idling {
		e.leaveIdle() // idle.go: before the command translates anything
	}
	e.startCommand()
	st := e.execute(&e.job)
	e.endCommand()
	switch st {
	case preempted:
		e.preempt() // sched.go: saved; another channel runs next
	case stalled:
		e.stall() // fault.go: saved, and not served until the driver replays
	case abi.StatusTimeout:
		e.complete(st)
		e.signal()
		e.hang(false) // sched.go: the watchdog faults the channel and its context
	case engineReset:
		e.complete(abi.StatusTimeout)
		e.signal()
		e.hang(true)
		e.resetEngine() // watchdog.go: the command never reached a boundary
	default:
		e.complete(st)
		e.signal()
	}
	return true
}

// ANCHOR_END: pollloop

// stopRequested reports whether the driver has stored ControlStop. The load
// is of a line the driver writes once in the device's life, so it stays in
// the engine's cache: polling it costs a few nanoseconds.
func (e *Engine) stopRequested() bool {
	return e.regs.Load(abi.RegControl) == abi.ControlStop
}

// stop publishes that this engine has stopped, and, if it is the last one,
// that the device has. The stores come after the engine's last write to a
// completion or to memory, so a driver that reads DeviceStopped knows every
// completion is final.
func (e *Engine) stop() {
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindStop, Start: e.dev.clock.Now(), Engine: e.id})
	}
	e.regs.Store(e.statusPage+abi.RegEngineState, abi.EngineStopped)
	if e.dev.live.Add(-1) == 0 {
		e.regs.Store(abi.RegDeviceState, abi.DeviceStopped)
		e.dev.stopWatchdog()             // watchdog.go: nothing left to watch
		e.dev.raise(abi.IrqCauseStopped) // blocked waiters must look at the state
		e.dev.disconnectInterrupts()
	}
}

// ANCHOR: pause

// pause is what a spinning engine does between empty polls: once it has
// spun for spin.YieldAfter (package spin says why a time and not a count of
// polls) it yields the P, and, once the spin has gone on for a while, the
// CPU (spin.Yield). (Whether an idle engine spins at all is
// idle's choice, in idle.go.)
//
// Two spinning engines and a host thread do not fit on a 2-core machine. An
// engine that never yields holds its P until the Go scheduler preempts it
// (sysmon asks after 10 ms; MACHINE.md's hand probe of three spinners on
// two cores measured ~20 ms), so the host that rang the doorbell waits
// that long to run. The stages record at f0bd540 shows it as an average:
// SpinYield/every=never, nothing yielding, took 1.4 µs a round trip at the
// median in stage 0 (0.43-1.9 µs over five passes, against 124 ns for
// RoundTrip/engine=copy) and 0.34 ms in stages 2 to 4, most round trips
// fast and a few waiting out a preemption. (From stage 7 on, an idle
// compute engine sleeps, and two spinners fit on two cores.)
// Calling runtime.Gosched every quarter of a microsecond spun hands the P
// to any runnable goroutine — the host, the other engine — and costs a few
// hundred nanoseconds when nothing else wants it. The engine goroutine is not locked
// to an OS thread: on a locked thread each yield is a trip through the kernel
// (21 µs a round trip in MACHINE.md's hand probe of a locked ping-pong; no
// record measures it), which is worse than not yielding at all.
func (e *Engine) pause(polls int) {
	if e.yield.Due(polls) {
		spin.Yield(polls)
	}
}

// ANCHOR_END: pause

// pauseIdle is pause for an engine with nothing in view — idle's spin:
// on the cadence until it has found nothing for spin.GiveWayAfter, then
// it gives the P way after every empty poll (spin.Cadence.Idle says why)
// and the CPU, as spin.Yield does, only at every clock check: a
// sched_yield per poll would bill a system call to every poll.
func (e *Engine) pauseIdle(polls int) {
	switch {
	case !e.yield.Idle(polls):
	case e.yield.GivingWay() && polls%spin.CheckEvery != 0:
		runtime.Gosched()
	default:
		spin.Yield(polls)
	}
}

// fault stops serving the channel being served: it publishes why (the value
// first, then the fault, which the driver polls), raises the interrupt
// line for it, and never reads the channel's ring or doorbell again. The
// other channels are not affected.
func (e *Engine) fault(f abi.ChannelFault, value uint64) {
	c := e.cur
	c.faulted = true
	e.regs.Store(c.status+abi.RegChannelFaultValue, value)
	// This store publishes the fault, and with it every completion and
	// fence the engine wrote before it: the timeline is final. The
	// driver's loads of RegChannelFault pair with it — in its waits, and
	// in its interrupt handler, which runs after the raise below.
	e.regs.Store(c.status+abi.RegChannelFault, uint64(f))
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindFault, Start: e.dev.clock.Now(), Engine: e.id,
			Channel: c.id, Arg: uint64(f), Seq: value})
	}
	// Tell the driver: its waiters for commands the channel will never run
	// must stop waiting. Unlike a fence's, this interrupt is not gated by
	// RegIrqArm: a waiter armed for a fence that will never come must hear
	// of it.
	e.regs.Set(abi.IrqChannelsReg(c.id))
	e.dev.raise(abi.IrqCauseChannel)
}
