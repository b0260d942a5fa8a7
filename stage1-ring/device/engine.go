package device

import (
	"runtime"

	"softgpu/stage1-ring/abi"
	"softgpu/stage1-ring/internal/spin"
	"softgpu/stage1-ring/mmio"
	"softgpu/stage1-ring/trace"
)

// Engine is one of the device's engines: a goroutine that polls the
// doorbell of the channel it serves and executes the commands it announces.
type Engine struct {
	dev   *Device
	id    abi.Engine
	regs  *mmio.Registers
	trace *trace.Buffer // nil when tracing is off

	ringSize uint64
	mask     uint64 // ringSize-1: index & mask is an entry

	yield spin.Cadence // when pause yields; the engine goroutine's own

	// Private to the engine goroutine.
	cur *chanState // the engine's one channel: fetch and complete work on it
	job job        // the command being executed (execute.go)
}

func newEngine(d *Device, id abi.Engine) *Engine {
	return &Engine{dev: d, id: id, regs: d.regs, trace: d.trace,
		ringSize: d.cfg.RingSize, mask: d.cfg.RingSize - 1, yield: spin.NewCadence(d.cfg.YieldEvery), cur: &d.chans[abi.DefaultChannel(id)]}
}

// ANCHOR: pollloop

// pollLoop is the engine's whole life: fetch the next command, execute it,
// publish its completion; when there is nothing to fetch, idle; until the
// driver (or Close) stops the device. A ring instead of a mailbox, or
// sleeping instead of spinning, replaces the pieces, not the loop.
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

// step runs the next command, if there is one: fetch it, execute it,
// publish its completion. It reports whether there was one. It is the
// whole of the engine's work for a command; pollLoop adds the waiting
// between commands, and a stepped device (stepped.go) calls it on the
// driver's goroutine instead.
func (e *Engine) step() bool {
	if !e.fetch() {
		return false
	}
	e.complete(e.execute(&e.job))
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
	e.regs.Store(abi.EngineStatusPage(e.id)+abi.RegEngineState, abi.EngineStopped)
	if e.dev.live.Add(-1) == 0 {
		e.regs.Store(abi.RegDeviceState, abi.DeviceStopped)
	}
}

// ANCHOR: idle

// idle is what the engine does after an empty poll; polls counts the empty
// polls since the engine last ran a command (1 for the first). It spins,
// yielding on the cadence, and after every empty poll once it has found
// nothing for spin.GiveWayAfter: an engine with nothing in view holds a P
// that the host or the other engine may be waiting for.
func (e *Engine) idle(polls int) {
	if e.yield.Idle(polls) {
		runtime.Gosched()
	}
}

// ANCHOR_END: idle

// ANCHOR: pause

// pause is what a spinning engine does between empty polls: it yields the
// P once it has spun for spin.YieldAfter (package spin says why a time and
// not a count of polls).
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
		runtime.Gosched()
	}
}

// ANCHOR_END: pause

// fault stops serving the channel being served: it publishes why (the value
// first, then the fault, which the driver polls) and never reads the
// channel's ring or doorbell again. The other channels are not affected.
func (e *Engine) fault(f abi.ChannelFault, value uint64) {
	c := e.cur
	c.faulted = true
	e.regs.Store(c.status+abi.RegChannelFaultValue, value)
	e.regs.Store(c.status+abi.RegChannelFault, uint64(f))
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindFault, Start: e.dev.clock.Now(), Engine: e.id,
			Channel: c.id, Arg: uint64(f), Seq: value})
	}
}
