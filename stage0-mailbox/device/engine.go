package device

import (
	"runtime"

	"softgpu/stage0-mailbox/abi"
)

// Engine is one of the device's engines: a goroutine that polls its mailbox
// and executes the command it finds there.
type Engine struct {
	dev  *Device
	id   abi.Engine
	bank uint64 // base of this engine's registers, abi.EngineRegs(id)
	slot []byte // the command slot, written by the driver

	yieldEvery int    // empty polls between yields; < 0 means never
	seen       uint64 // the last doorbell value fetched (private to the engine goroutine)
}

func newEngine(d *Device, id abi.Engine) *Engine {
	return &Engine{dev: d, id: id, bank: abi.EngineRegs(id), slot: d.slots[id], yieldEvery: d.cfg.YieldEvery}
}

// ANCHOR: pollloop
// pollLoop is the engine's whole life: fetch the next command, execute it,
// publish its completion; when there is nothing to fetch, idle; until the
// device closes. Later stages replace the pieces, not the loop: stage 1
// fetches from a ring, stage 7 idles by sleeping.
func (e *Engine) pollLoop() {
	defer e.dev.running.Done()
	for polls := 1; ; polls++ {
		if desc, seq, ok := e.fetch(); ok {
			e.complete(seq, e.execute(desc))
			polls = 0
			continue
		}
		if e.dev.stopping.Load() {
			return
		}
		e.idle(polls)
	}
}

// ANCHOR_END: pollloop

// ANCHOR: mailbox
// fetch returns the command in the slot if the driver has rung the doorbell
// since the last fetch, with the sequence number the doorbell carried.
func (e *Engine) fetch() (desc []byte, seq uint64, ok bool) {
	// This load pairs with the driver's store to RegDoorbell in
	// driver.pushLocked: seeing the new value means the slot writes that
	// preceded that store are visible, so the slot can be decoded.
	seq = e.dev.regs.Load(e.bank + abi.RegDoorbell)
	if seq == e.seen {
		return nil, 0, false
	}
	e.seen = seq
	return e.slot, seq, true
}

// complete publishes the status of command seq.
func (e *Engine) complete(seq uint64, status abi.Status) {
	regs := e.dev.regs
	regs.Store(e.bank+abi.RegCompletedStatus, uint64(status))
	// This store publishes the status stored just above; the driver's load
	// of RegCompletedSeq in waitLocked pairs with it and reads the status
	// only after seeing seq here.
	regs.Store(e.bank+abi.RegCompletedSeq, seq)
}

// ANCHOR_END: mailbox

// ANCHOR: idle
// idle is what the engine does between empty polls: it spins, yielding now
// and then.
//
// Two spinning engines and a host thread do not fit on a 2-core machine. An
// engine that never yields holds its P until the Go scheduler preempts it
// (~10-20 ms), so the host that rang the doorbell waits that long to run.
// Calling runtime.Gosched every yieldEvery empty polls hands the P to any
// runnable goroutine — the host, the other engine — and costs a few hundred
// nanoseconds when nothing else wants it. The engine goroutine is not locked
// to an OS thread: on a locked thread each yield is a trip through the kernel
// (~20 µs here), which is worse than not yielding at all.
func (e *Engine) idle(polls int) { e.pause(polls) }

// pause yields the P on every yieldEvery-th poll of a spin loop.
func (e *Engine) pause(polls int) {
	if e.yieldEvery > 0 && polls%e.yieldEvery == 0 {
		runtime.Gosched()
	}
}

// ANCHOR_END: idle
