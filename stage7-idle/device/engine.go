package device

import (
	"runtime"

	"softgpu/stage7-idle/abi"
)

// Engine is one of the device's engines: a goroutine that polls its ring's
// doorbell and executes the commands it announces.
type Engine struct {
	dev  *Device
	id   abi.Engine
	bank uint64 // base of this engine's registers, abi.EngineRegs(id)
	ring []byte // the command ring, written by the driver
	mask uint64 // RingSize-1: index & mask is a slot

	status []byte // the ring's status array, written by this engine

	yieldEvery int    // empty polls between yields; < 0 means never
	head       uint64 // the next index to run; RegHead follows it (private to the engine goroutine)
	tail       uint64 // the last doorbell value fetched (private to the engine goroutine)
	held       uint64 // window entries the running command holds; RegDMAHeld follows it (private; see dma.go)

	wakeup    chan struct{} // idle.go: a sleeping engine waits for a token here; buffered, one token
	idleSince uint64        // idle.go: clock at the first empty poll since the last command (private)
}

func newEngine(d *Device, id abi.Engine) *Engine {
	return &Engine{dev: d, id: id, bank: abi.EngineRegs(id), ring: d.rings[id], mask: d.cfg.RingSize - 1,
		status: d.statuses[id], yieldEvery: d.cfg.YieldEvery, head: d.cfg.RingStart, tail: d.cfg.RingStart,
		wakeup: make(chan struct{}, 1)}
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
			f := fenceOf(desc) // read before complete hands the slot back to the driver
			e.complete(seq, e.execute(desc))
			e.signal(f)
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

// ANCHOR: pause
// pause is what a spinning engine does between empty polls: it yields the
// P on every yieldEvery-th one. (Whether an idle engine spins at all is
// idle's choice, in idle.go.)
//
// Two spinning engines and a host thread do not fit on a 2-core machine. An
// engine that never yields holds its P until the Go scheduler preempts it
// (~10-20 ms), so the host that rang the doorbell waits that long to run.
// Calling runtime.Gosched every yieldEvery empty polls hands the P to any
// runnable goroutine — the host, the other engine — and costs a few hundred
// nanoseconds when nothing else wants it. The engine goroutine is not locked
// to an OS thread: on a locked thread each yield is a trip through the kernel
// (~20 µs here), which is worse than not yielding at all.
func (e *Engine) pause(polls int) {
	if e.yieldEvery > 0 && polls%e.yieldEvery == 0 {
		runtime.Gosched()
	}
}

// ANCHOR_END: pause
