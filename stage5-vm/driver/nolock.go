package driver

import (
	"context"
	"fmt"
	"sync/atomic"

	"softgpu/stage5-vm/abi"
)

// This file is the lock-free submission protocol: many goroutines submit to
// one channel's ring at once, and commands complete, with no lock. Every
// word they share has a stated writer, and every step they take is an
// atomic operation on one of them — but for owner, a plain word whose
// every read is ordered after its write by a chain of those (reapPassed).
//
//	submitter (Submit, SubmitBatch)                   engine (unchanged)
//	reserve  first = reserved.Add(n) - n
//	         [first, first+n) is this batch's, and so is
//	         its fence: first+n, the last index + 1
//	write    for each index i of the batch:
//	           wait for freeFor[i&mask] == i
//	             (reap i-size first if it has completed)
//	           owner[i&mask] = its request (nil: reaps its own)
//	           encode command i into slot i&mask
//	mark     written[i&mask] = i, last index first
//	publish  if publishing.CompareAndSwap(false, true):
//	           scan from rung over every written slot
//	           store the new tail → RegDoorbell  ──────────► fetch: load RegDoorbell,
//	           publishing = false; look again                  run the slots below it
//	waiter   completion entry i reads i  ◄───────────────  complete: status, then index
//	reap:    claim the request (result 0 → reaping), or, for
//	         a Submit, nothing to claim: it is its own reaper;
//	         read the status, store freeFor[i&mask] = i+size
//
// The words, each with who writes it (indices are free-running and compared
// only wrap-safely):
//
//	reserved      every submitter, by atomic add: the next index to hand out
//	written[k]    the submitter of the command in slot k, once it is fully
//	              written: slot k holds command written[k]
//	publishing    set by the one goroutine publishing, with CompareAndSwap;
//	              cleared by it when it is done
//	rung          the publishing goroutine: the driver's shadow of RegDoorbell
//	freeFor[k]    the goroutine that reaped slot k's last command, once per
//	              lap: slot k may take command freeFor[k]
//	owner[k]      the submitter of the command in slot k, before it marks
//	              it written; read by the submitter of the slot's next
//	              command (a plain word)
//	req.result    the reaper that claimed the request; read by its waiters
//
// Invariants, for every index i (differences mod 2^64):
//   - exactly one submitter reserves i, and only it writes slot i&mask for
//     i, only after freeFor[i&mask] == i, and it sets written[i&mask] = i
//     only after the slot is fully written;
//   - RegDoorbell only moves forward, and every index below it is fully
//     written: only the holder of publishing stores it, and only over slots
//     whose written word it has just read. A submitter that stalls between
//     reserve and mark leaves a slot unwritten, and the doorbell stops
//     there: the submitters behind it return, their commands wait in the
//     ring, and the engine never reads a slot nobody finished writing;
//   - rung <= reserved, and reserved-rung is unbounded: a submitter that
//     reserves beyond a full ring waits in "write" for its slot, so a full
//     ring is backpressure, never an error or a drop;
//   - exactly one goroutine reads the completion entry of command i for
//     its status — a synchronous Submit for its own command, or whoever's
//     CompareAndSwap moves a batch's req.result from 0 to reaping — and it
//     frees the slot (freeFor = i+size) only after that read, so the entry
//     is never overwritten by command i+size before it has been read.
//
// Who reaps: a waiter reaps its own commands once they have completed; a
// submitter that needs a slot whose previous command was a batch's that
// nobody has waited for reaps that one. Nothing else ever has to: a slot
// is only needed by the submitter of its next command, and a synchronous
// Submit is always there to reap its own.
//
// Go's atomics are sequentially consistent, stronger than the release and
// acquire a real driver would use; the comments still name each pair.

// pad keeps the words on either side of it on different cache lines:
// reserved is written by every submitter, publishing by every publisher,
// and neither should steal the other's line.
type pad [64]byte

// counters is a ring's submission words, each on its own cache line.
type counters struct {
	_          pad
	reserved   atomic.Uint64 // next index to hand out; every submitter adds to it
	_          pad
	publishing atomic.Bool // held, never waited for, by the goroutine moving the doorbell
	rung       uint64      // shadow of RegDoorbell; touched only while holding publishing
	_          pad
}

// Values of request.result: resultPending until a reaper claims the
// request, resultReaping while it copies the status out, then resultDone
// with the status in the low 32 bits.
const (
	resultPending = 0
	resultReaping = 1
	resultDone    = 1 << 32
)

// ANCHOR: reserve

// reserve hands out n consecutive ring indices, [first, first+n). It is one
// atomic add: it never fails and never waits — a full ring makes the
// submitter wait later, for each slot, in awaitSlot.
func (ch *Channel) reserve(n uint64) (first uint64) {
	return ch.reserved.Add(n) - n
}

// ANCHOR_END: reserve

// slotFree reports whether slot i&mask may take command i: the command it
// held a lap ago, i-size, has been reaped. This load pairs with the
// reaper's store of freeFor, which comes after its read of the status.
func (ch *Channel) slotFree(i uint64) bool { return ch.freeFor[i&ch.mask].Load() == i }

// ANCHOR: awaitslot

// awaitSlot waits until slot i&mask may take command i. If the engine has
// completed the slot's previous command, i-size, and it belongs to a batch
// nobody has reaped — its waiter has not come, or never will — it reaps it
// itself. It returns an error if the device stops or the channel faults
// first.
//
// It waits as a fence wait does: it polls for the channel's poll budget,
// then sleeps on the timeline until the fence after i-size, and looks
// again. There is always such a fence: the batch containing i-size ends at
// one (at least i-size+1) if it is another submitter's, and if it is the
// caller's own, the run the caller published before waiting ends at one
// (SubmitBatch fences the last command of each run it publishes).
// A submitter held up by a full ring burns no core for longer than the
// budget, however long the engine takes.
//
// The caller has marked and published every command of its own below i, so
// if i-size is its own (a batch longer than the ring), the engine can get
// to it.
func (ch *Channel) awaitSlot(i uint64) error {
	free := func() bool {
		if !ch.slotFree(i) {
			ch.reapPassed(i - ch.size)
		}
		return ch.slotFree(i)
	}
	for {
		budget := ch.pollBudget
		if ch.waitMode == WaitPoll {
			budget = 0
		}
		err := ch.spinFor(free, budget)
		if err != errBudgetSpent {
			return err
		}
		if err := (Fence{ch: ch, value: i - ch.size + 1}).block(context.Background()); err != nil && !free() {
			return err
		}
	}
}

// ANCHOR_END: awaitslot

// reapPassed reaps command i if it belongs to a batch and the engine has
// completed it. The caller has reserved i+size, whose slot it is: only it
// writes that slot's owner entry next, so the owner entry it reads is
// still command i's.
//
// The completion is looked at before the owner entry, not after: the
// entry's index pairs with the engine's store in complete, which comes
// after the engine read slot i, which comes after i's submitter stored
// owner and marked the slot — so a completed i guarantees i's owner entry
// is in place. Loaded the other way round, the owner entry could still be
// the previous lap's, stored before i's submitter got there.
//
// That chain — the mark, the doorbell, the completion, each a store that
// another goroutine's load pairs with — is also why owner is a plain word:
// it orders the submitter's store of the entry before this load, in Go's
// memory model, so they cannot race (and the race detector checks it). An
// atomic store would be a locked instruction for every command a batch
// writes (XCHG on amd64), which waits until the stores before it, to the
// slot of the command before, have left the core.
func (ch *Channel) reapPassed(i uint64) {
	if !ch.completed(i) {
		return // not run yet
	}
	req := ch.owner[i&ch.mask]
	if req == nil {
		return // a Submit's own command: its submitter reaps it
	}
	if req.index != i {
		panic(fmt.Sprintf("driver: invariant owner[i&mask] is the request of i broken: slot %d holds %#x, want %#x", i&ch.mask, req.index, i))
	}
	ch.reap(req)
}

// ANCHOR: mark

// mark declares commands [from, to) fully written. It marks the last first:
// a publisher's scan stops at the first unmarked slot, so it finds the run
// whole, or not at all, and a batch that fits goes out under one doorbell.
func (ch *Channel) markWritten(from, to uint64) {
	for i := to; i != from; {
		i--
		// This store publishes the slot writes of command i to whoever
		// publishes it; the load in publish pairs with it.
		ch.written[i&ch.mask].Store(i)
	}
}

// ANCHOR_END: mark

// ANCHOR: publish

// publish moves the doorbell over every written slot after it, unless
// another goroutine is doing so already — in which case that one publishes
// the caller's slots too. It never waits. (It may yield once: a doorbell
// that woke a sleeping engine hands it the thread, idle.go.) It reports
// whether its own doorbell woke the engine, for the copy estimate
// (estimate.go, expect).
//
// Only the holder of publishing stores the doorbell, so RegDoorbell only
// moves forward, as the device requires. The scan moves it over written
// slots only, so it never covers a slot still being written; and it ends
// within a ring: command rung+size cannot be written before command rung
// has run.
//
// No marked slot is left unpublished. A submitter marks, then tries to take
// publishing; the holder releases publishing, then looks once more at the
// slot where its scan stopped. Each side stores, then loads what the other
// stores, and Go's atomics are sequentially consistent: if the submitter's
// CompareAndSwap failed, the holder's look comes after it and sees the mark,
// and the holder goes round again.
func (ch *Channel) publish() (woke bool) {
	for ch.publishing.CompareAndSwap(false, true) {
		tail, wokeNow := ch.rung, false
		// These loads pair with the stores in markWritten.
		for ch.written[tail&ch.mask].Load() == tail {
			tail++
		}
		if tail != ch.rung {
			// This store publishes every slot write the loads above
			// saw; the engine's load of RegDoorbell in fetch pairs
			// with it.
			ch.regs.Store(ch.doorbell+abi.RegDoorbell, tail)
			wokeNow = ch.wakeIfIdle() // after the store, never before (idle.go)
			ch.rung = tail
			ch.doorbells.Add(1)
			if h := ch.hooks.Published; h != nil {
				h(ch.id) // a benchmark may run the engine's side here (device/stepped.go)
			}
		}
		if h := ch.hooks.Publishing; h != nil {
			h(ch.id) // a test may hold publishing longer here
		}
		ch.publishing.Store(false)
		if wokeNow {
			woke = true
			handoff() // run the woken engine now, not while holding publishing
		}
		// The look after the release: a slot marked while this goroutine
		// held publishing, by a submitter whose CompareAndSwap failed.
		if ch.written[tail&ch.mask].Load() != tail {
			return woke
		}
	}
	return woke
}

// ANCHOR_END: publish

// ANCHOR: reap

// reap copies a batch command's status into its request and frees its
// slot, unless another goroutine has claimed the request first. The engine
// must have completed req.index.
//
// The claim is the CompareAndSwap: one reaper per command reads its
// completion entry, and it stores freeFor — letting the slot's next command
// be written, and so, later, the entry be overwritten — only after that
// read.
func (ch *Channel) reap(req *request) {
	if !req.result.CompareAndSwap(resultPending, resultReaping) {
		return // reaped, or being reaped, by someone else
	}
	status := ch.statusOf(req.index)
	// This store delivers the status; a waiter's load in collect pairs
	// with it.
	req.result.Store(resultDone | uint64(status))
	ch.free(req.index)
}

// ANCHOR_END: reap

// The copy path's one lock comes off too: a pinned copy finds its region in
// a snapshot of the live regions' spans, not under pinMu.

// ANCHOR: spans

// pinnedSpan is where a live pinned region lies, host and bus side.
type pinnedSpan struct{ host, size, bus uint64 }

// publishSpansLocked replaces the snapshot of the live regions' spans that
// pinnedBus reads, after register or HostFree changed regions. The store
// publishes a new slice, never an old one changed: a copy still reading the
// previous snapshot reads memory nobody writes again. Called with pinMu.
func (d *Driver) publishSpansLocked() {
	spans := make([]pinnedSpan, len(d.regions))
	for i, r := range d.regions {
		spans[i] = pinnedSpan{host: r.host, size: uint64(len(r.bytes)), bus: r.bus}
	}
	d.pinnedSpans.Store(&spans)
}

// spans returns the latest snapshot of the live regions' spans. A region
// HostFree is taking out may still be in it: a copy that names it then
// fails with abi.StatusNoDMA, as a copy that looked it up just before
// HostFree did under the lock.
func (d *Driver) spans() []pinnedSpan {
	if p := d.pinnedSpans.Load(); p != nil {
		return *p
	}
	return nil
}

// ANCHOR_END: spans
