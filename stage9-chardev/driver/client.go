package driver

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/futex"
)

// A Client is the driver's channel half, running in a process that does
// not own the device (an application of the daemon's, softgpud). The
// daemon's Driver keeps everything device-wide — memory, page tables,
// runlists, the DMA window, the interrupt line — and opens channels for
// the client (ChannelOptions.Share and Notify); the client maps each
// channel's pages and attaches a Channel to them here. From then on the
// Channel is the same code as in-process: Submit stores into the ring
// and the doorbell, Wait polls the fence and then blocks, and nothing on
// that path calls the daemon.
//
// What differs is how a blocked waiter sleeps and what wakes it. In-process
// the interrupt handler reads the device's interrupt status and signals
// the channels it names, waking each waiter through a Go channel. Here a
// waiter that has armed the interrupt sleeps in the kernel on its
// channel's fence word itself (sleep, below), and the engine, which in
// the daemon calls the channel's vector instead of raising the line,
// wakes it with a futex wake on that word: one system call from the
// fence to the waiter, with no thread of either process in between.
//
// The rest still travels as interrupts. A client cannot read the
// device's interrupt status — it is in the privileged control page — so
// the daemon's handler, finding one of the client's channels in it (a
// fault, or the device stopping), tells the client (Notify, an eventfd
// write), and the client's Hardware turns that into a token on its
// Interrupts line. The client's handler then wakes the sleepers of every
// channel it has, and each looks at its channel for itself.
type Client struct {
	env channelEnv

	closed    atomic.Bool
	hooks     Hooks
	doorbells atomic.Uint64
	stats     stats

	mu    sync.Mutex
	chans map[abi.Channel]*Channel
	done  chan struct{} // closed when the interrupt loop has returned
}

// NewClient makes the channel half of a driver over hw, a device served
// from another process: hw's registers hold only the pages that process
// shared, and its Memory is nil. Of cfg only the wait settings matter
// (Wait, PollBudget, Wake, YieldEvery). The client's interrupt loop runs
// until hw's Interrupts line is closed.
func NewClient(hw Hardware, cfg Config) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cl := &Client{chans: map[abi.Channel]*Channel{}, done: make(chan struct{})}
	cl.env = channelEnv{hw: hw, regs: hw.Registers(), yieldEvery: cfg.YieldEvery, closed: &cl.closed, hooks: &cl.hooks,
		doorbells: &cl.doorbells, waitMode: cfg.Wait, pollBudget: cfg.PollBudget, sizedWait: cfg.sizedWait, wake: cfg.Wake, stats: &cl.stats,
		sleepFor: cfg.SleepTimeout}
	go cl.interruptLoop(hw.Interrupts())
	return cl, nil
}

// Attach makes the Channel for channel id of engine e, whose pages the
// client has mapped into its Hardware, in context ctx (which every
// command of it carries). closer takes the channel off its engine — a
// call to the daemon — and is what the Channel's Close calls.
func (cl *Client) Attach(id abi.Channel, e abi.Engine, ctx abi.Context, closer func() error) (*Channel, error) {
	if cl.closed.Load() {
		return nil, ErrClosed
	}
	if e >= abi.NumEngines {
		return nil, fmt.Errorf("%w: %d", ErrNoEngine, e)
	}
	ch, err := cl.env.channel(id, e)
	if err != nil {
		return nil, err
	}
	ch.ctxID, ch.closer = ctx, closer
	ch.fenceWord = ch.regs.Word(ch.status + abi.RegFence)
	if cl.env.wake == WakeEvery {
		ch.regs.Store(ch.doorbell+abi.RegIrqArm, abi.IrqEvery)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed.Load() {
		return nil, ErrClosed
	}
	cl.chans[id] = ch
	return ch, nil
}

// closeAttached is Close for an attached channel: the daemon takes it off
// its engine (the engine completes what it leaves with StatusRemoved,
// writing their fences, which wakes the waiter asleep on the fence word),
// and every waiter settles: wakeAll wakes the word again — the status
// page stays readable, final, after the closer, as a private copy at the
// same address (client/hardware.go, letGo and unmapChannel) — and the
// queued waiters.
func (ch *Channel) closeAttached() error {
	if ch.gone.Swap(true) {
		return nil
	}
	err := ch.closer()
	ch.removed.Store(true)
	ch.timeline.wakeAll()
	return err
}

// Detach forgets a closed channel: the client's interrupts no longer
// signal it.
func (cl *Client) Detach(ch *Channel) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.chans[ch.id] == ch {
		delete(cl.chans, ch.id)
	}
}

// Lost is called when the daemon has gone — its socket closed under the
// client — and with it every channel: nothing more will complete, so
// every submission fails with ErrClosed and every waiter settles. It
// returns once the interrupt loop has, if the Hardware's line is closed.
func (cl *Client) Lost() {
	cl.closed.Store(true)
	cl.mu.Lock()
	chans := make([]*Channel, 0, len(cl.chans))
	for _, ch := range cl.chans {
		chans = append(chans, ch)
	}
	cl.mu.Unlock()
	for _, ch := range chans {
		ch.gone.Store(true)
		ch.removed.Store(true)
		ch.timeline.wakeAll()
	}
}

// Done is closed when the client's interrupt loop has returned.
func (cl *Client) Done() <-chan struct{} { return cl.done }

// Stats returns the client's interrupt counters (IRQs counts the
// daemon's notifications).
func (cl *Client) Stats() Stats {
	return Stats{IRQs: cl.stats.irqs.Load(), Wakeups: cl.stats.wakeups.Load(),
		FutileWakeups: cl.stats.futileWakeups.Load(), EngineWakes: cl.stats.engineWakes.Load(),
		SleepTimeouts: cl.stats.sleepTimeouts.Load()}
}

// Doorbells returns how many doorbell stores the client has made.
func (cl *Client) Doorbells() uint64 { return cl.doorbells.Load() }

// ANCHOR: sleep

// sleep is block for a channel attached in a client. Its waiters arm the
// interrupt and queue as in-process, but no interrupt thread of this
// process will wake them: instead one of them, the sleeper, sleeps in the
// kernel on the fence word for all of them, and the engine's vector wakes
// it (device.FenceVector). The sleeper then does the interrupt handler's
// work — wakes the queued waiters whose fences were reached, each on its
// Go channel — and sleeps again, until its own fence comes; as it leaves,
// it hands the word to the least waiter left. So one thread per channel
// is in the kernel, however many goroutines wait, and a fence wakes the
// waiters it reached, not all of them.
//
// No wake-up is lost on the word. The sleeper stores the target and the
// arm (add), then loads RegFence and sleeps only while the word still
// holds what it loaded; the engine stores RegFence, then loads the arm
// and wakes the word. Either the engine's load sees the arm — its wake
// comes after its store, and the kernel either finds the sleeper asleep
// or refuses it the sleep because the word has moved — or the sleeper's
// load sees the store and it does not sleep. The armed target is the
// least of every queued waiter's, so the word is woken for the first
// fence any of them waits for. Nor is one lost in the queue: the sleeper
// leaves only after waking the least waiter left, which re-arms and
// takes the word.
//
// A fault, the device stopping or the daemon going do not move the
// word, so their wake (wakeAll) reaches a sleeper only if it is already
// asleep; one about to sleep notices them at its timeout (sleepFor, 10
// ms by default). The timeout also bounds a ctx that ends between the
// check below and the sleep, and a word that moved by a multiple of 2^32
// between the load and the sleep (a futex compares 32 bits).
func (f Fence) sleep(ctx context.Context) error {
	ch := f.ch
	tl := &ch.timeline
	w := &waiter{target: f.value, wake: make(chan struct{}, 1)}
	defer tl.leave(w)
	for {
		if tl.add(w) {
			return f.settleEnded() // signalled while arming, or ended: no sleep
		}
		if tl.lead(w) {
			// This load pairs with the engine's store of RegFence (see above).
			seen := ch.regs.Load(ch.status + abi.RegFence)
			if !abi.Reached(seen, f.value) && ctx.Err() == nil {
				stop := context.AfterFunc(ctx, func() { futex.Wake(ch.fenceWord) })
				if futex.Wait(ch.fenceWord, seen, ch.sleepFor) {
					ch.stats.sleepTimeouts.Add(1)
				}
				stop()
				ch.stats.wakeups.Add(1)
			}
			tl.remove(w)
			select { // a token sent while w was queued: w is out of the queue now, and looks for itself
			case <-w.wake:
			default:
			}
			tl.wakeReached() // the others whose fences came, as the handler would
		} else {
			select {
			case <-w.wake:
				ch.stats.wakeups.Add(1)
			case <-ctx.Done():
				tl.remove(w)
				return ctx.Err()
			}
		}
		if f.Signaled() {
			return nil
		}
		if ch.endedErr() != nil {
			return f.settleEnded()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		ch.stats.futileWakeups.Add(1)
	}
}

// lead makes w the sleeper if there is none, and reports whether w is to
// sleep on the word now: not if it was taken out of the queue since its
// add — a token waits on its Go channel, and with it perhaps the word
// (leave), which w then keeps until it sleeps or leaves.
func (tl *timeline) lead(w *waiter) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.sleeper == nil {
		tl.sleeper = w
	}
	return tl.sleeper == w && w.index >= 0
}

// leave gives up the word if w holds it, and hands it to the least waiter
// left: that waiter holds it from here — woken on its Go channel, it
// re-arms and sleeps on the word in w's place, or, if it has its fence or
// its context ended meanwhile, leaves and hands it on in turn. (Made the
// sleeper only when it next called lead, it could return first, and the
// queue would be left with no one on the word.)
func (tl *timeline) leave(w *waiter) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.sleeper != w {
		return
	}
	tl.sleeper = nil
	if len(tl.waiters) > 0 {
		next := heap.Pop(&tl.waiters).(*waiter)
		tl.sleeper = next
		select {
		case next.wake <- struct{}{}:
		default: // woken already: it will look
		}
		tl.armLocked()
	}
}

// defaultSleepTimeout is the longest a client's waiter sleeps without
// looking at its fence: long against any wake-up (tens of microseconds),
// short against a wait a person would notice.
const defaultSleepTimeout = 10 * time.Millisecond

// ANCHOR_END: sleep

// ANCHOR: clientirq

// interruptLoop is the client's interrupt handler: a token is a
// notification from the daemon that some channel of this client has
// something for its waiters — a fault, the device stopping. A channel
// that faulted, or a device that stopped, wakes every waiter to settle;
// any other signals its timeline, waking the waiters whose fences came.
// Either also wakes the waiter asleep on the channel's fence word.
func (cl *Client) interruptLoop(line <-chan struct{}) {
	defer close(cl.done)
	for range line {
		cl.stats.irqs.Add(1)
		cl.mu.Lock()
		chans := make([]*Channel, 0, len(cl.chans))
		for _, ch := range cl.chans {
			chans = append(chans, ch)
		}
		cl.mu.Unlock()
		for _, ch := range chans {
			if ch.stopped() || ch.faultError() != nil {
				ch.timeline.wakeAll()
			} else {
				ch.timeline.signal()
			}
		}
	}
}

// ANCHOR_END: clientirq
