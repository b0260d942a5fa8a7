package device

import (
	"runtime"

	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/trace"
)

// This file is the engine's side of fences and interrupts (the contract is in
// abi/fence.go). After a command with FlagFence completes — its completion
// entry already written — the engine writes its channel's fence timeline;
// with FlagInterrupt as well, it then reads the driver's arm registers and
// may raise the interrupt line.
//
// Raising the line is what hardware does: set the cause bits, assert the
// line, go on. Here the line is a channel of one token that the driver's
// interrupt thread receives from (Interrupts); the engine's send never
// blocks — a token already waiting means the thread has yet to look, and
// it will see the new bits when it does. The engine spends no time in the
// driver's handler, though it lends its thread to it (raise). When the
// device stops, it raises IrqCauseStopped and then closes the line: the
// driver's interrupt thread handles the cause and, finding the line
// closed, ends. When it faults a channel, it raises
// IrqCauseChannel (engine.go, fault): that channel's fences stop where
// they are, and its waiters must be told.
//
// A command refused for its flags still writes the fence it asked for:
// the refusal travels in its status, and a waiter on the fence is never
// left waiting for a value that will not come.

// resetFence puts channel c's fence timeline at Start, as a device comes
// out of reset, with its interrupt disarmed.
func (d *Device) resetFence(c abi.Channel) {
	d.regs.Store(abi.ChannelStatusPage(c)+abi.RegFence, d.cfg.Start)
	d.regs.Store(abi.DoorbellPage(c)+abi.RegIrqArm, abi.IrqOff)
}

// Interrupts connects a driver to the interrupt line and returns it: it
// holds a token whenever the device has raised the line since the driver
// last received from it (RegIrqCause says why), and is closed when the
// device stops. A driver binding to a device that had one before takes the
// line over: the earlier driver's line is closed, as if its interrupt had
// been disconnected.
func (d *Device) Interrupts() <-chan struct{} {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	line := make(chan struct{}, 1)
	if d.irq != nil {
		close(d.irq)
	}
	if d.regs.Load(abi.RegDeviceState) == abi.DeviceStopped {
		close(line) // nothing will ever be raised again
		line, d.irq = nil, nil
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	d.irq = line
	return line
}

// ANCHOR: signal

// signal writes the fence of the command just completed, if it asked for
// one, and raises the interrupt line if it asks for that too and the
// driver's arm registers say so.
func (e *Engine) signal() {
	flags, fence := e.job.cmd.Flags, e.job.cmd.Fence
	if flags&abi.FlagFence == 0 {
		return
	}
	regs := e.regs
	// This store publishes the timeline. It pairs with the driver's loads
	// of RegFence: in Fence.Signaled, and in the interrupt handler.
	regs.Store(e.cur.status+abi.RegFence, fence)
	// The stamp comes after the store, off the way from completion to
	// waiter: a waiter woken by the interrupt finds it in place, since the
	// line is raised after it.
	regs.Store(e.cur.status+abi.RegFenceCycles, e.dev.clock.Now())
	if flags&abi.FlagInterrupt == 0 {
		return
	}
	// No lost wake-up: the engine stores RegFence, then loads RegIrqArm and
	// RegIrqTarget; a waiter stores the target and the arm, then loads
	// RegFence (driver/fence.go, add). Both are sequentially consistent, so
	// at least one side sees the other's store: either this load sees the
	// waiter's target and raises, or the waiter's load sees this fence and
	// does not sleep.
	switch regs.Load(e.cur.doorbell + abi.RegIrqArm) {
	case abi.IrqEvery:
		e.raiseFence()
	case abi.IrqTarget:
		if abi.Reached(fence, regs.Load(e.cur.doorbell+abi.RegIrqTarget)) {
			e.raiseFence()
		}
	}
}

// ANCHOR_END: signal

// raiseFence raises the line for a fence of the engine's channel: the
// count, the channel's bit, the cause, then the line.
func (e *Engine) raiseFence() {
	regs := e.regs
	c := e.cur
	regs.Store(c.status+abi.RegIrqCount, regs.Load(c.status+abi.RegIrqCount)+1) // the engine serving it is its only writer
	regs.Set(abi.IrqChannelsReg(c.id))
	// The event is recorded before the line is raised: once the token is
	// sent, the driver's thread may handle it and record that before this
	// thread runs again, and a trace must not show the handling first.
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindIRQRaise, Start: e.dev.clock.Now(), Engine: e.id, Channel: c.id,
			Arg: abi.IrqCauseFence})
	}
	e.dev.raise(abi.IrqCauseFence)
}

// ANCHOR: raise

// raise sets cause in RegIrqCause and asserts the line. The bits are set
// before the token is sent: the driver's thread, once it has the token,
// reads every cause raised before it.
//
// A token that went in may have woken the driver's interrupt thread, and
// Go runs a goroutine woken by a channel send next on the sender's own
// thread (its runnext slot), not now: on a spinning engine's thread that
// is at its next yield, up to spin.YieldAfter away, unless an idle thread
// steals it sooner. A real line is taken by another CPU at once, so the
// engine yields here, once, after letting go of irqMu: the handler runs
// and the engine goes back to work after it, or on the other thread if
// that one comes free first. With nobody parked on the line, the yield
// finds nothing else to run and costs a trip through the scheduler.
func (d *Device) raise(cause uint64) {
	d.regs.Set(abi.RegIrqCause, cause)
	if d.assert() {
		runtime.Gosched()
	}
}

// assert sends the line's token and reports whether it went in.
func (d *Device) assert() bool {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	select {
	case d.irq <- struct{}{}: // a nil line (no driver connected) is never ready
		return true
	default: // a token is already waiting: the driver has yet to look, and will see these bits too
		return false
	}
}

// disconnectInterrupts closes the line for good: the device has stopped.
func (d *Device) disconnectInterrupts() {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	if d.irq != nil {
		close(d.irq)
		d.irq = nil
	}
}

// ANCHOR_END: raise
