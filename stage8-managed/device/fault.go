package device

import (
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/trace"
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
// unreplayable path. A full buffer drops the record (counted in
// RegFaultOverflow) and still stalls: the driver replays every stalled
// channel after each batch, so this one faults again and is recorded then.
func (d *Device) recordFault(e *Engine, va uint64, acc access) bool {
	d.faultMu.Lock()
	defer d.faultMu.Unlock()
	regs := d.regs
	base, size, ok := d.faultRing()
	if !ok {
		return false
	}
	put := regs.Load(abi.RegFaultPut)
	get := regs.Load(abi.RegFaultGet) // pairs with the driver's store after it read the records below get
	dropped := uint64(0)
	if put-get >= size { // full — or a get the driver should never have stored
		regs.Store(abi.RegFaultOverflow, regs.Load(abi.RegFaultOverflow)+1)
		dropped = 1
	} else {
		at := base + put%size*abi.FaultRecordSize
		abi.FaultRecord{VA: va, Timestamp: d.clock.Now(), Channel: e.cur.id, Context: e.mmu.ctx,
			Engine: e.id, Write: acc == writing}.Encode(d.mem[at:])
		// Stored after the record: a driver that loads this count reads
		// the record whole.
		regs.Store(abi.RegFaultPut, put+1)
	}
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindStall, Start: d.clock.Now(), Engine: e.id, Channel: e.cur.id,
			Seq: va, Arg: dropped})
	}
	// The load comes after the store of RegFaultPut: a handler that is
	// polling sees the record, one that is about to block sees it on its
	// last look, or has stored 1 here first (abi/managed.go).
	if regs.Load(abi.RegFaultNeedIrq) != 0 {
		d.raise(abi.IrqCauseFault)
	}
	return true
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
// record, or a fault that raced the replay, is never lost.)
func (e *Engine) checkReplay() {
	gen := e.regs.Load(abi.RegFaultReplay)
	if gen == e.replaySeen {
		return
	}
	e.replaySeen = gen
	for _, c := range e.list {
		c.stalled = false
	}
	if e.trace != nil {
		e.trace.Record(trace.Event{Kind: trace.KindReplay, Start: e.dev.clock.Now(), Engine: e.id, Arg: gen})
	}
}

// ANCHOR_END: stall
