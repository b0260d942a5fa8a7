package driver

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"softgpu/stage5-vm/abi"
	"softgpu/stage5-vm/internal/spin"
)

// Completion: how the driver learns that a command is done, and how it
// ended. The engine writes each command's completion entry — status, then
// index — and the driver polls the entry of the command it waits for: one
// line the engine wrote, and nothing else. Reaping copies a completed
// command's status out of its entry and frees its slot (freeFor), after
// which the entry may be overwritten by the command a lap later.

// request is one command of a batch, as the driver tracks it.
type request struct {
	op    abi.Opcode
	index uint64 // ring index

	// result is resultPending, then resultReaping while its one reaper
	// copies the status out, then resultDone|status (nolock.go, reap).
	result atomic.Uint64
}

// Pending is a batch of submitted commands on one channel. Wait for it to
// learn how they ended.
type Pending struct {
	ch    *Channel
	last  uint64 // ring index of the last command
	fence Fence  // signalled by the last command: last+1
	reqs  []request
	one   [1]request // reqs' storage for a batch of one, saving an allocation
}

// Len returns the number of commands in the batch.
func (p *Pending) Len() int { return len(p.reqs) }

// Fence returns the fence the batch's last command signals.
func (p *Pending) Fence() Fence { return p.fence }

// completed reports whether the engine has completed command i. The load
// pairs with the engine's store of the entry's index in complete; the test
// is wrap-safe and stays true after the entry is reused (abi.Completed).
func (ch *Channel) completed(i uint64) bool {
	return abi.Completed(ch.completions[abi.CompletionWord(i, ch.mask)].Load(), i)
}

// statusOf reads command i's status from its entry. The entry must hold i:
// the engine has completed i and nobody has reaped it yet.
func (ch *Channel) statusOf(i uint64) abi.Status {
	return abi.Status(ch.completions[abi.CompletionWord(i, ch.mask)+1].Load())
}

// free reaps command i for the goroutine that owns it: its status has been
// read. This store pairs with slotFree's load: a submitter that sees it
// may write command i+size into the slot, and the engine will then
// overwrite the entry.
func (ch *Channel) free(i uint64) { ch.freeFor[i&ch.mask].Store(i + ch.size) }

// ANCHOR: wait

// awaitCommand waits, in the channel's wait mode, until the engine has
// completed command i — which carries fence i+1 — and returns its status.
// exp is what the estimate expects of it (expect), zero for no estimate.
// Polling watches the command's completion entry, one line; blocking
// sleeps on the fence until the interrupt. Once it returns without an
// error the engine is done with the command, so the caller may free what
// the command named.
func (ch *Channel) awaitCommand(i uint64, exp expectation) (abi.Status, error) {
	var err error
	switch ch.waitMode {
	case WaitPoll:
		return ch.awaitCompleted(i)
	case WaitHybrid:
		// The budget is the estimate's for a copy (estimate.go): longer
		// than PollBudget for a copy expected later, none at all for one
		// expected beyond MaxSizedPoll.
		budget, blockNow := ch.budgetFor(exp)
		if h := ch.hooks.WaitBudget; h != nil {
			if b := h(); b != 0 {
				budget, blockNow = b, false
			}
		}
		if blockNow {
			break
		}
		err = ch.spinFor(func() bool { return ch.completed(i) }, budget)
		if err == nil {
			if exp.bytes != 0 {
				ch.completedCopy(exp, ch.regs.Load(abi.RegTimestamp)) // seen while polling: within a poll of the end
			}
			return ch.statusOf(i), nil
		}
		if err != errBudgetSpent {
			return ch.settle(i, err)
		}
	}
	if err = (Fence{ch: ch, value: i + 1}).block(context.Background()); err != nil {
		return ch.settle(i, err)
	}
	if exp.bytes != 0 {
		if end, ok := ch.fenceEnd(i, exp.start); ok {
			ch.completedCopy(exp, end)
		}
	}
	return ch.awaitCompleted(i) // the fence is written after the entry: one load
}

// settle answers a wait for command i that ended with err (the device
// stopped, or the channel faulted): the command's real status if the
// engine completed it after all, else err.
func (ch *Channel) settle(i uint64, err error) (abi.Status, error) {
	if ch.completed(i) {
		return ch.statusOf(i), nil
	}
	return 0, err
}

// awaitCompleted spins until the engine has completed command i and
// returns its status. It takes no lock: one atomic load per poll, of the
// entry the engine writes.
//
// Every so often it looks at the device's state: once the device has
// stopped (the driver's Close, or the device's), every completion it will
// ever write is written, so a last look settles it — the command's real
// status if the engine ran it (a DELAY cut short reports
// abi.StatusAborted), ErrClosed if it never took it. A faulted channel ends
// the wait too. Either way, once awaitCompleted returns the engine is done
// with the command, so the caller may free what the command named.
func (ch *Channel) awaitCompleted(i uint64) (abi.Status, error) {
	if err := ch.spin(func() bool { return ch.completed(i) }); err != nil {
		return 0, err
	}
	return ch.statusOf(i), nil
}

// spin polls cond until it reports true; see spinFor.
func (ch *Channel) spin(cond func() bool) error { return ch.spinFor(cond, 0) }

// spinFor polls cond until it reports true, yielding now and then, for at
// most budget cycles (0: no limit), then returns errBudgetSpent. Every 64
// polls it also looks at the device and the channel: when the device has
// stopped, or the channel has faulted, it polls cond once more and returns
// nil if it is true by then, or why it never will be.
func (ch *Channel) spinFor(cond func() bool, budget uint64) error {
	var start uint64 // the budget's start: the first look at the clock, 64 polls in
	yield := spin.NewCadence(ch.yieldEvery)
	for polls := 1; ; polls++ {
		if cond() {
			return nil
		}
		// The yield keeps its own cadence, outside the every-64 block
		// below, so that a YieldEvery that is not a multiple of 64
		// means what it says.
		if yield.Due(polls) {
			spin.Yield(polls)
		}
		if polls%64 != 0 {
			continue
		}
		if err := ch.endedErr(); err != nil {
			if cond() {
				return nil
			}
			return err
		}
		if budget > 0 {
			// The clock is read only here, every 64 polls: a wait that
			// ends sooner — most do — never pays for a read (tens of
			// nanoseconds by internal/spin's hand timings of
			// time.Since; no record times it), and the budget starts
			// 64 polls late, which it does not notice.
			if now := ch.regs.Load(abi.RegTimestamp); start == 0 {
				start = now
			} else if now-start >= budget {
				return errBudgetSpent
			}
		}
	}
}

// Wait waits until every command of the batch has completed, or the
// device has stopped; see WaitContext.
func (p *Pending) Wait() error { return p.WaitContext(context.Background()) }

// WaitContext waits until every command of the batch has completed, and
// returns nil if all succeeded. Otherwise it returns the error of a batch
// of one as it is, and for a larger batch an errors.Join of one error per
// failed command, each naming its place in the batch; each wraps a
// *CommandError (and so its abi.Status), or is ErrClosed (or the
// channel's fault) for a command the device never ran. If ctx ends first
// it returns ctx.Err() (the commands go on; wait again to learn how they
// ended). When it returns nil or a
// command error, the engine is done with every command of the batch. It
// may be called again, and from several goroutines.
func (p *Pending) WaitContext(ctx context.Context) error {
	if len(p.reqs) == 0 {
		return nil
	}
	// A wait that ended because nothing more of the channel will run —
	// the device stopped, or the channel faulted — is settled below,
	// command by command: reaping finds which commands finished.
	if err := p.fence.WaitContext(ctx); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrChannelFaulted) {
		return err
	}
	p.ch.awaitCompleted(p.last) // the fence is written after the entry: one load
	p.collect()
	if len(p.reqs) == 1 {
		return p.Err(0)
	}
	var errs []error
	for i := range p.reqs {
		if err := p.Err(i); err != nil {
			errs = append(errs, fmt.Errorf("command %d of %d: %w", i, len(p.reqs), err))
		}
	}
	return errors.Join(errs...)
}

// ANCHOR_END: wait

// collect reaps every command of the batch the engine has completed, or
// waits for the goroutine that has claimed it to finish. A command the
// engine never ran (the device stopped first) stays unreaped: ErrClosed.
func (p *Pending) collect() {
	for i := range p.reqs {
		req := &p.reqs[i]
		if !p.ch.completed(req.index) {
			continue
		}
		p.ch.reap(req)
		// Another reaper may hold the claim: it is between two stores.
		for req.result.Load()&resultDone == 0 {
			runtime.Gosched()
		}
	}
}

// Err returns the error of the batch's command i (nil if it succeeded):
// a *CommandError, ErrClosed or the channel's fault for a command the
// device never ran, or — for an i outside the batch — an error saying so.
// It does not wait: call Wait first.
func (p *Pending) Err(i int) error {
	if i < 0 || i >= len(p.reqs) {
		return fmt.Errorf("softgpu: command %d of a batch of %d", i, len(p.reqs))
	}
	// This load pairs with the reaper's store of the result.
	result := p.reqs[i].result.Load()
	status := abi.Status(uint32(result))
	switch {
	case result&resultDone == 0:
		if err := p.ch.endedErr(); err != nil {
			return err // why it never ran: the device stopped, or the channel faulted
		}
		return ErrClosed
	case status != abi.StatusOK:
		return &CommandError{Engine: p.ch.engine, Op: p.reqs[i].op, Seq: p.reqs[i].index, Status: status}
	}
	return nil
}
