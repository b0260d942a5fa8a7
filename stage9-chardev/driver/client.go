package driver

import (
	"fmt"
	"sync"
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
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
// What differs is where a blocked waiter's wake-up comes from. In-process
// the interrupt handler reads the device's interrupt status and signals
// the channels it names. A client cannot read that status — it is in the
// privileged control page — so the daemon's handler, finding one of the
// client's channels in it, tells the client (Notify, an eventfd write),
// and the client's Hardware turns that into a token on its Interrupts
// line. The client's handler then signals every channel it has: each
// signal reads the channel's fence and wakes the waiters it reached,
// exactly as in-process, and a channel that faulted or a device that
// stopped wakes them all, to settle.
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
		doorbells: &cl.doorbells, waitMode: cfg.Wait, pollBudget: cfg.PollBudget, wake: cfg.Wake, stats: &cl.stats}
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
// its engine (the engine completes what it leaves with StatusRemoved),
// and every waiter settles.
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
		FutileWakeups: cl.stats.futileWakeups.Load(), EngineWakes: cl.stats.engineWakes.Load()}
}

// Doorbells returns how many doorbell stores the client has made.
func (cl *Client) Doorbells() uint64 { return cl.doorbells.Load() }

// ANCHOR: clientirq

// interruptLoop is the client's interrupt handler: a token is a
// notification from the daemon that some channel of this client has
// something for its waiters. A signal that finds nothing reached costs a
// lock and a load; a channel that faulted, or a device that stopped,
// wakes every waiter to settle.
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
