package driver

import (
	"container/heap"
	"context"
	"errors"
	"runtime"
	"sync"

	"softgpu/stage7-idle/abi"
)

// This file is the driver's side of fences (stage 2): the Fence a caller
// waits on, the three ways to wait, and each engine's list of blocked
// waiters with the arm registers that tell the device when to interrupt.
//
// Every batch the driver submits ends with a command that carries FlagFence
// and FlagInterrupt, fenced with its ring index + 1. The engine completes
// commands in ring order, so each engine's timeline (RegFence) only grows,
// and "my fence has signalled" is abi.Reached(RegFence, value).
//
// A blocked waiter and the device meet in two places (driver/irq.go has the
// third, the handler):
//
//	waiter (block)                           engine (device/fence.go, signal)
//	lock; push; store RegIrqTarget = min;    store RegFence = v
//	store RegIrqArm = IrqTarget; unlock      load RegIrqArm, RegIrqTarget
//	load RegFence: reached? don't sleep      reached the target? raise the line
//
// Each side stores, then loads what the other stores. Go's atomics are
// sequentially consistent, so at least one side sees the other: the device
// raises, or the waiter sees its fence and does not sleep. That is the whole
// argument that no wake-up is lost at arming time.
//
// Invariants of a timeline, under timeline.mu:
//   - waiters is a min-heap by target, compared wrap-safely;
//   - in targeted mode, RegIrqArm is IrqTarget with RegIrqTarget the least
//     target exactly when waiters is not empty, and IrqOff otherwise;
//   - a waiter is in waiters only while its goroutine is in block, between
//     add and its wake, its context's end, or Close.

// WaitMode is how a Fence's Wait waits.
type WaitMode int

const (
	// WaitHybrid polls for Config.PollBudget cycles, then blocks. The
	// default: short waits never pay for a wake-up, long ones never burn a
	// core.
	WaitHybrid WaitMode = iota
	// WaitPoll spins on the timeline until the fence signals.
	WaitPoll
	// WaitBlock publishes the fence as an interrupt target and sleeps until
	// the interrupt handler wakes it.
	WaitBlock
)

func (m WaitMode) String() string {
	switch m {
	case WaitHybrid:
		return "hybrid"
	case WaitPoll:
		return "poll"
	case WaitBlock:
		return "block"
	}
	return "waitmode(?)"
}

// DefaultPollBudget is the hybrid wait's polling budget: 50 µs, a little
// less than what waking a parked goroutine costs on the measured machine
// (MACHINE.md: ~72 µs), so a wait that polls to the end of its budget has
// spent about what blocking would have cost.
const DefaultPollBudget = 50_000

// Fence is a point on one engine's timeline: it signals when the engine has
// completed the command that carries it, and with it every command before it
// on that engine. The zero Fence is signalled.
type Fence struct {
	d      *Driver
	engine abi.Engine
	value  uint64
}

// Engine returns the engine whose timeline f is on.
func (f Fence) Engine() abi.Engine { return f.engine }

// Value returns f's value on its timeline.
func (f Fence) Value() uint64 { return f.value }

// Signaled reports whether f has signalled. It never blocks.
func (f Fence) Signaled() bool {
	if f.d == nil {
		return true
	}
	// This load pairs with the engine's store of RegFence in signal.
	return abi.Reached(f.d.regs.Load(abi.EngineRegs(f.engine)+abi.RegFence), f.value)
}

// SignaledAt returns the device clock (in cycles) at which f's engine last
// wrote its timeline — when f signalled, if f is the latest fence on it.
func (f Fence) SignaledAt() uint64 {
	if f.d == nil {
		return 0
	}
	return f.d.regs.Load(abi.EngineRegs(f.engine) + abi.RegFenceCycles)
}

// ANCHOR: wait
// Wait waits until f has signalled, ctx is done, or the driver is closed, in
// the driver's wait mode. It returns nil once f has signalled; ctx.Err() if
// ctx ended first; ErrClosed if Close stopped the device before the engine
// reached f. If f signalled, the engine is done with every command up to f.
func (f Fence) Wait(ctx context.Context) error {
	if f.Signaled() {
		return nil
	}
	switch f.d.waitMode {
	case WaitPoll:
		return f.poll(ctx, 0)
	case WaitBlock:
		return f.block(ctx)
	}
	if err := f.poll(ctx, f.d.pollBudget); err != errBudgetSpent {
		return err
	}
	return f.block(ctx)
}

// ANCHOR_END: wait

// WaitAll waits for every fence, on any engines, in turn: it returns nil
// when all have signalled, or the first error.
func WaitAll(ctx context.Context, fences ...Fence) error {
	for _, f := range fences {
		if err := f.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

var errBudgetSpent = errors.New("driver: poll budget spent")

// poll spins on the timeline, yielding as the engines do, for at most budget
// cycles (0: no limit), then returns errBudgetSpent.
func (f Fence) poll(ctx context.Context, budget uint64) error {
	d := f.d
	checkEvery := d.yieldEvery
	if checkEvery < 0 {
		checkEvery = 1024
	}
	start := d.dev.Clock().Now()
	for polls := 1; ; polls++ {
		if f.Signaled() {
			return nil
		}
		if polls%checkEvery != 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.closed.Load() {
			return f.settleClosed()
		}
		if budget > 0 && d.dev.Clock().Now()-start >= budget {
			return errBudgetSpent
		}
		if d.yieldEvery > 0 {
			runtime.Gosched()
		}
	}
}

// ANCHOR: block
// block publishes f as a target and sleeps until the interrupt handler wakes
// it. A wake-up whose fence has not signalled — possible only in the
// untargeted mode, where every interrupt wakes every waiter — is futile: it
// is counted, and the waiter goes back to sleep.
func (f Fence) block(ctx context.Context) error {
	d := f.d
	tl := &d.timelines[f.engine]
	w := &waiter{target: f.value, wake: make(chan struct{}, 1)}
	for {
		if tl.add(w) {
			return nil // signalled while arming: no sleep, no wake-up
		}
		select {
		case <-w.wake:
			d.wakeups.Add(1)
			if f.Signaled() {
				return nil
			}
			d.futileWakeups.Add(1)
		case <-ctx.Done():
			tl.remove(w)
			return ctx.Err()
		case <-d.closing:
			tl.remove(w)
			return f.settleClosed()
		}
	}
}

// ANCHOR_END: block

// settleClosed answers a wait that Close interrupted. Closing the device
// waits for the engines to stop, so after it the timeline is final.
func (f Fence) settleClosed() error {
	f.d.dev.Close()
	if f.Signaled() {
		return nil
	}
	return ErrClosed
}

// waiter is one blocked Wait.
type waiter struct {
	target uint64        // the fence value it waits for
	wake   chan struct{} // buffered 1: the handler's send never blocks
	index  int           // position in the heap, -1 when not in it
}

// timeline is the driver's bookkeeping for one engine's fence timeline.
type timeline struct {
	d    *Driver
	bank uint64

	// mu guards waiters and the arm registers (the driver's side of them).
	// It is held briefly by waiters and by the signaller, never across a
	// sleep, and never with another lock. It is the one lock near the
	// completion path, and off its fast path: only a waiter about to sleep
	// and the handler that wakes it take it.
	mu      sync.Mutex
	waiters waiterHeap
}

// ANCHOR: arm
// add puts w among the waiters and arms the interrupt for the least target,
// then looks at the timeline once more. It reports true — and takes w out
// again — if w's fence has already signalled: the device may have written it
// before it could see the arm, and then no interrupt will come.
func (tl *timeline) add(w *waiter) bool {
	tl.mu.Lock()
	heap.Push(&tl.waiters, w)
	tl.armLocked()
	tl.mu.Unlock()
	// This load comes after the stores of armLocked; it pairs with the
	// engine's store of RegFence, which comes before its loads of the arm
	// registers (see the file comment).
	if abi.Reached(tl.d.regs.Load(tl.bank+abi.RegFence), w.target) {
		tl.remove(w)
		return true
	}
	return false
}

// armLocked makes the arm registers match the waiters: the least target, or
// off. In the untargeted mode the device is armed for every interrupt from
// the start and this does nothing.
func (tl *timeline) armLocked() {
	if tl.d.wake == WakeEvery {
		return
	}
	if len(tl.waiters) == 0 {
		tl.d.regs.Store(tl.bank+abi.RegIrqArm, abi.IrqOff)
		return
	}
	// Target first, then arm: an engine that sees IrqTarget reads a target
	// that is at least this new, or an older one whose waiter is being
	// served anyway.
	tl.d.regs.Store(tl.bank+abi.RegIrqTarget, tl.waiters[0].target)
	tl.d.regs.Store(tl.bank+abi.RegIrqArm, abi.IrqTarget)
}

// ANCHOR_END: arm

// remove takes w out of the waiters if it is still there.
func (tl *timeline) remove(w *waiter) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&tl.waiters, w.index)
		tl.armLocked()
	}
}

// waiterHeap orders waiters by target. Targets are compared wrap-safely,
// which is a total order as long as every live target lies within 2^63 of
// every other — true, since they are fences of commands in flight.
type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return int64(h[i].target-h[j].target) < 0 }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
