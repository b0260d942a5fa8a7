package driver

import (
	"container/heap"
	"context"
	"errors"
	"runtime"
	"sync"

	"softgpu/stage3-pinned/abi"
	"softgpu/stage3-pinned/internal/spin"
)

// This file is the driver's side of fences: the Fence a caller waits on,
// the three ways to wait, and each channel's list of blocked waiters with
// the arm registers that tell the device when to interrupt.
//
// Every batch the driver submits ends with a command that carries FlagFence
// and FlagInterrupt, fenced with its ring index + 1; so does every
// synchronous Submit. The engine completes commands in ring order, so each
// channel's timeline (RegFence) only grows, and "my fence has signalled" is
// abi.Reached(RegFence, value).
//
// A blocked waiter and the device meet in two places (irq.go has the third,
// the handler):
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
//     add and its wake, its context's end, the device stopping, or its
//     channel faulting.

// WaitMode is how a wait waits.
type WaitMode int

const (
	// WaitHybrid polls for Config.PollBudget cycles, then blocks — a
	// synchronous copy at the default budget polls for as long as the
	// driver expects it to take, within MaxSizedPoll (estimate.go). The
	// default: short waits never pay for a wake-up, long ones never burn a
	// core.
	WaitHybrid WaitMode = iota
	// WaitPoll spins until the command completes.
	WaitPoll
	// WaitBlock publishes the fence as an interrupt target and sleeps until
	// the interrupt handler wakes it.
	WaitBlock
)

// Defined reports whether m is a wait mode.
func (m WaitMode) Defined() bool { return m >= WaitHybrid && m <= WaitBlock }

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

// DefaultPollBudget is the hybrid wait's polling budget: 50 µs. It was set
// by the ski-rental rule — poll for about as long as blocking would cost —
// a little under what waking a goroutine parked on a channel cost in
// MACHINE.md's hand probe (~72 µs, the waker busy and no thread at hand to
// run the woken one). This device's interrupt path wakes a blocked waiter
// far sooner, because the engine that raises the line lends its thread to
// the handler and the waiter: in the stages record at f0bd540 the waiter
// runs again 0.9 µs after its fence at the median in stage 2
// (FenceSignal/irq=direct, 0.82-2.6 µs over five passes). By the rule,
// then, this budget is long for a fence wait here; the stage 2 chapter
// says so, and what a shorter one would cost no record has measured.
const DefaultPollBudget = 50_000

// Fence is a point on one channel's timeline: it signals when the engine
// has completed the command that carries it, and with it every command
// before it on that channel. The zero Fence is signalled.
type Fence struct {
	ch    *Channel
	value uint64
}

// Channel returns the channel whose timeline f is on.
func (f Fence) Channel() abi.Channel {
	if f.ch == nil {
		return 0
	}
	return f.ch.id
}

// Value returns f's value on its timeline.
func (f Fence) Value() uint64 { return f.value }

// Signaled reports whether f has signalled. It never blocks.
func (f Fence) Signaled() bool {
	if f.ch == nil {
		return true
	}
	// This load pairs with the engine's store of RegFence in signal.
	return abi.Reached(f.ch.regs.Load(f.ch.status+abi.RegFence), f.value)
}

// SignaledAt returns the device clock (in cycles) at which f's channel
// last wrote its timeline — when f signalled, if f is the latest fence on
// it. (The engine stamps it just after the store of the fence, so a waiter
// that polls may see the fence a moment before the stamp; one woken by the
// interrupt always sees both.)
func (f Fence) SignaledAt() uint64 {
	if f.ch == nil {
		return 0
	}
	return f.ch.regs.Load(f.ch.status + abi.RegFenceCycles)
}

// Wait waits until f has signalled, or until the device has stopped or
// the channel faulted; see WaitContext.
func (f Fence) Wait() error { return f.WaitContext(context.Background()) }

// ANCHOR: wait

// WaitContext waits until f has signalled, ctx is done, or nothing more
// of f's channel will run, in the channel's wait mode. It returns nil once
// f has signalled; ctx.Err() if ctx ended first; ErrClosed if the device
// stopped, or an error wrapping ErrChannelFaulted if the channel faulted,
// before the engine reached f. If f signalled, the engine is done with
// every command up to f.
func (f Fence) WaitContext(ctx context.Context) error {
	if f.Signaled() {
		return nil
	}
	switch f.ch.waitMode {
	case WaitPoll:
		return f.poll(ctx, 0)
	case WaitBlock:
		return f.block(ctx)
	}
	if err := f.poll(ctx, f.ch.pollBudget); err != errBudgetSpent {
		return err
	}
	return f.block(ctx)
}

// ANCHOR_END: wait

var errBudgetSpent = errors.New("driver: poll budget spent")

// poll spins on the timeline, yielding as the engines do, for at most budget
// cycles (0: no limit), then returns errBudgetSpent.
func (f Fence) poll(ctx context.Context, budget uint64) error {
	ch := f.ch
	var start uint64 // the budget's start: the first look at the clock, 64 polls in
	yield := spin.NewCadence(ch.yieldEvery)
	for polls := 1; ; polls++ {
		if f.Signaled() {
			return nil
		}
		// The yield keeps its own cadence, outside the every-64 block
		// below, so that a YieldEvery that is not a multiple of 64
		// means what it says.
		if yield.Due(polls) {
			runtime.Gosched()
		}
		if polls%64 != 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if ch.endedErr() != nil {
			return f.settleEnded()
		}
		if budget > 0 {
			if now := ch.regs.Load(abi.RegTimestamp); start == 0 {
				start = now
			} else if now-start >= budget {
				return errBudgetSpent
			}
		}
	}
}

// ANCHOR: block

// block publishes f as a target and sleeps until the interrupt handler wakes
// it. A wake-up whose fence has not signalled — possible only in the
// untargeted mode, where every interrupt wakes every waiter — is futile: it
// is counted, and the waiter goes back to sleep. A wake-up because the
// device stopped, or the channel faulted, settles the wait.
func (f Fence) block(ctx context.Context) error {
	ch := f.ch
	tl := &ch.timeline
	w := &waiter{target: f.value, wake: make(chan struct{}, 1)}
	for {
		if tl.add(w) {
			// Signalled while arming, or the channel ended: no sleep,
			// no wake-up. (Ended is not signalled: settle it.)
			return f.settleEnded()
		}
		select {
		case <-w.wake:
			ch.stats.wakeups.Add(1)
			if f.Signaled() {
				return nil
			}
			if ch.endedErr() != nil {
				return f.settleEnded()
			}
			ch.stats.futileWakeups.Add(1)
		case <-ctx.Done():
			tl.remove(w)
			return ctx.Err()
		}
	}
}

// ANCHOR_END: block

// settleEnded answers a wait on a channel that nothing more will run on —
// the device stopped, or the channel faulted: its timeline is final.
func (f Fence) settleEnded() error {
	if f.Signaled() {
		return nil
	}
	return f.ch.endedErr()
}

// waiter is one blocked wait.
type waiter struct {
	target uint64        // the fence value it waits for
	wake   chan struct{} // buffered 1: the handler's send never blocks
	index  int           // position in the heap, -1 when not in it
}

// timeline is the driver's bookkeeping for one channel's fence timeline.
type timeline struct {
	ch *Channel

	// mu guards waiters and the arm registers (the driver's side of them).
	// It is held briefly by waiters and by the signaller, never across a
	// sleep, and never with another lock. It is off the completion path's
	// fast path: only a waiter about to sleep and the handler that wakes
	// it take it.
	mu      sync.Mutex
	waiters waiterHeap
}

// ANCHOR: arm

// add puts w among the waiters and arms the interrupt for the least target,
// then looks at the timeline once more. It reports true — and takes w out
// again — if w's fence has already signalled: the device may have written it
// before it could see the arm, and then no interrupt will come. The device
// having stopped, or the channel having faulted, counts as true too: no
// interrupt will come either.
//
// No wake-up is lost to a fault: the handler loads RegChannelFault and
// then, under mu, wakes every waiter (irq.go, handleInterrupt). If it took
// mu after the push below, it finds w there and wakes it; if before, then
// the load below comes after the handler's, which saw the fault, and sees
// it too.
func (tl *timeline) add(w *waiter) bool {
	tl.mu.Lock()
	heap.Push(&tl.waiters, w)
	tl.armLocked()
	tl.mu.Unlock()
	// This load comes after the stores of armLocked; it pairs with the
	// engine's store of RegFence, which comes before its loads of the arm
	// registers (see the file comment).
	if abi.Reached(tl.ch.regs.Load(tl.ch.status+abi.RegFence), w.target) || tl.ch.endedErr() != nil {
		tl.remove(w)
		return true
	}
	return false
}

// armLocked makes the arm registers match the waiters: the least target, or
// off. In the untargeted mode the device is armed for every interrupt from
// the start and this does nothing.
func (tl *timeline) armLocked() {
	ch := tl.ch
	if ch.wake == WakeEvery {
		return
	}
	if len(tl.waiters) == 0 {
		ch.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqOff)
		return
	}
	// Target first, then arm: an engine that sees IrqTarget reads a target
	// that is at least this new, or an older one whose waiter is being
	// served anyway.
	ch.regs.Store(ch.doorbell+abi.RegIrqTarget, tl.waiters[0].target)
	ch.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqTarget)
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

// ANCHOR: signal

// signal wakes the waiters whose fences have signalled — or, untargeted,
// every waiter — and re-arms the interrupt for those that remain.
//
// No waiter is left asleep with its fence reached. Its fence was written
// either before this load of RegFence (then it is popped here), or after:
// then the engine, having stored that fence, loads the arm registers and
// finds either the target armed before this signal (no greater than the
// fence: an interrupt) or the one armed below (the least remaining target,
// at most this waiter's: an interrupt). The next interrupt serves it.
func (tl *timeline) signal() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	// This load pairs with the engine's store of RegFence.
	fence := tl.ch.regs.Load(tl.ch.status + abi.RegFence)
	for len(tl.waiters) > 0 && (tl.ch.wake == WakeEvery || abi.Reached(fence, tl.waiters[0].target)) {
		w := heap.Pop(&tl.waiters).(*waiter)
		w.wake <- struct{}{} // cannot block: buffered, and a waiter is woken once per add
	}
	tl.armLocked()
}

// ANCHOR_END: signal

// wakeAll wakes every waiter, whatever its fence: the device has stopped,
// or the channel faulted, and each must settle its wait.
func (tl *timeline) wakeAll() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for len(tl.waiters) > 0 {
		w := heap.Pop(&tl.waiters).(*waiter)
		w.wake <- struct{}{}
	}
	tl.armLocked()
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
