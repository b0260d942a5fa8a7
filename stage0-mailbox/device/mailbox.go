package device

import (
	"softgpu/stage0-mailbox/abi"
	"softgpu/stage0-mailbox/trace"
)

// This file is the engine's side of the mailbox (the registers are in
// abi/registers.go): fetch and complete, the two pieces of pollLoop that
// deal with the channel. Per channel:
//
//	slot                 64 bytes, written by the driver, read by the engine
//	RegDoorbell          the sequence number of the command in the slot, written by the driver
//	RegCompletedStatus   the status of the last command finished, written by the engine
//	RegCompletedSeq      its sequence number, written by the engine after the status
//
// The protocol allows one command in flight: the driver rings with the
// next sequence number, seen+1, and rings again only after it has read the
// completion. The engine checks that: any other doorbell value faults the
// channel, and the engine never runs what the slot holds then.

// ANCHOR: mailbox

// fetch takes the command in the slot if the driver has rung the doorbell
// since the last fetch: it decodes the descriptor out of the slot into the
// engine's job, so that nothing the driver writes afterwards can change a
// command half-way through its checks.
func (e *Engine) fetch() bool {
	if e.faulted {
		return false
	}
	// This load pairs with the driver's store to RegDoorbell in
	// driver.Channel.push: seeing the new value means the slot writes that
	// preceded that store are visible, so the slot can be copied.
	seq := e.regs.Load(e.doorbell + abi.RegDoorbell)
	if seq == e.seen {
		return false
	}
	if seq != e.seen+1 {
		e.fault(abi.FaultDoorbell, seq)
		return false
	}
	if e.stopRequested() {
		return false // a stopping engine starts nothing new
	}
	e.seen = seq
	e.job.load(e.slot, seq)
	if e.trace != nil {
		now := e.dev.clock.Now()
		e.trace.Record(trace.Event{Kind: trace.KindDoorbell, Start: now, Engine: e.id, Channel: e.channel, Arg: seq})
		e.job.start = now
	}
	return true
}

// complete publishes the status of the command fetch took.
func (e *Engine) complete(status abi.Status) {
	e.record(status)
	e.regs.Store(e.status+abi.RegCompletedStatus, uint64(status))
	// This store publishes the status stored just above; the driver's load
	// of RegCompletedSeq pairs with it and reads the status only after
	// seeing its sequence number here.
	e.regs.Store(e.status+abi.RegCompletedSeq, e.job.seq)
}

// ANCHOR_END: mailbox

// record traces the command just executed.
func (e *Engine) record(status abi.Status) {
	if e.trace == nil {
		return
	}
	c := &e.job.cmd
	e.trace.Record(trace.Event{Kind: trace.KindCommand, Start: e.job.start, End: e.dev.clock.Now(), Engine: e.id,
		Channel: e.channel, Op: c.Op, Status: uint8(status), Seq: e.job.seq, Size: traceSize(c)})
}

// traceSize is what a trace shows as a command's size: its bytes, or for
// DELAY its cycles.
func traceSize(c *abi.Command) uint64 {
	if c.Op == abi.OpDelay {
		return c.Value
	}
	return c.Size
}
