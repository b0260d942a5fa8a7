package device

import (
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/trace"
)

// This file is the engine's half of replayable faults (the protocol and
// the record's layout are in abi/managed.go; the driver's half is
// driver/faults.go). A translation that reaches a managed page not on the
// device does not fail the command: the engine writes a fault record,
// raises IrqCauseFault, and stalls the channel — the command is saved in
// its state block at its cursor, as a preemption saves it, and the
// channel is left out of scheduling until the driver replays. The fault
// comes from translate, before a byte of the run it was resolving moves,
// so the cursor is exact: on replay the command carries on from the first
// byte it had not handled, and no byte is moved twice (ADD32 adds once).
//
// A channel without a state block has nowhere to wait: its command fails
// with the fault, as any translation fault does. So does a fault when the
// driver has not set up a fault buffer.

// stalled is execute's result for a command stopped by a replayable fault;
// like preempted, it is never a command's status.
const stalled abi.Status = 1<<31 + 1

// ANCHOR: record

// recordFault writes a fault record for an access of engine e's command at
// va, raises the interrupt, and reports whether the channel should stall:
// false if there is no usable fault buffer, and the fault must take the
// unreplayable path. It is a burst of one record (burst.go, recordBurst,
// the one writer of records): a full buffer drops the record (counted in
// RegFaultOverflow) and still stalls, since the driver replays every
// stalled channel after each batch, so this one faults again and is
// recorded then; and the interrupt is raised only while the handler asks
// for one (RegFaultNeedIrq).
func (d *Device) recordFault(e *Engine, va uint64, acc access) bool {
	return d.recordBurst(e, va, 1, []uint64{va &^ (1<<abi.PageShift - 1)}, acc)
}

// ANCHOR_END: record

// ANCHOR: stall

// stall saves the command a replayable fault stopped, marked StateFaulted,
// and takes its channel out of scheduling until the next replay.
func (e *Engine) stall() {
	e.save(abi.StateSaved|abi.StateFaulted, e.dev.clock.Now())
	e.cur.stalled = true
}

// checkReplay serves the stalled channels again once the driver has stored
// a new replay generation. The engine calls it between commands; its load
// pairs with the driver's store in replay. Every stalled channel resumes,
// whichever fault the driver has handled: one whose page is still not
// resident faults again and is recorded again. (That is how a dropped
// record, or a fault that raced the replay, is never lost.) With every
// channel resumed, the engine holds none stalled, and says so in
// RegStalled, after its load of the generation: the driver's next replay
// will not wake it for nothing (abi/managed.go); a channel that faults
// again stores the 1 again before its record.
func (e *Engine) checkReplay() {
	gen := e.regs.Load(abi.RegFaultReplay)
	if gen == e.replaySeen {
		return
	}
	e.replaySeen = gen
	for _, c := range e.list {
		c.stalled = false
	}
	e.regs.Store(e.statusPage+abi.RegStalled, 0)
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindReplay, Start: e.dev.clock.Now(), Engine: e.id, Arg: gen})
	}
}

// ANCHOR_END: stall
