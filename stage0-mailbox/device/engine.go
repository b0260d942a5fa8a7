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

	yieldEvery int // empty polls between yields; < 0 means never
}

func newEngine(d *Device, id abi.Engine) *Engine {
	return &Engine{dev: d, id: id, bank: abi.EngineRegs(id), slot: d.slots[id], yieldEvery: d.cfg.YieldEvery}
}

// ANCHOR: pollloop
// pollLoop is the engine's whole life: spin on the doorbell, run what it
// announces, publish completion, until the device closes.
//
// Two spinning engines and a host thread do not fit on a 2-core machine. An
// engine that never yields holds its P until the Go scheduler preempts it
// (~10-20 ms), so the host that rang the doorbell waits that long to run.
// Calling runtime.Gosched every yieldEvery empty polls hands the P to any
// runnable goroutine — the host, the other engine — and costs a few hundred
// nanoseconds when nothing else wants it. The engine goroutine is not locked
// to an OS thread: on a locked thread each yield is a trip through the kernel
// (~20 µs here), which is worse than not yielding at all.
func (e *Engine) pollLoop() {
	defer e.dev.running.Done()
	regs := e.dev.regs
	var seen uint64 // the last doorbell value this engine acted on (private)
	for polls := 1; ; polls++ {
		// This load pairs with the driver's store to RegDoorbell in
		// driver.Submit: seeing the new value means the slot writes that
		// preceded that store are visible, so the slot can be decoded.
		seq := regs.Load(e.bank + abi.RegDoorbell)
		if seq != seen {
			seen = seq
			cmd := abi.Decode(e.slot)
			status := e.execute(cmd)
			regs.Store(e.bank+abi.RegCompletedStatus, uint64(status))
			// This store publishes the status stored just above; the
			// driver's load of RegCompletedSeq in waitLocked pairs with it
			// and reads the status only after seeing seq here.
			regs.Store(e.bank+abi.RegCompletedSeq, seq)
			polls = 0
			continue
		}
		if e.dev.stopping.Load() {
			return
		}
		if e.yieldEvery > 0 && polls%e.yieldEvery == 0 {
			runtime.Gosched()
		}
	}
}

// ANCHOR_END: pollloop
