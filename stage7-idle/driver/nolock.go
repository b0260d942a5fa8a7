package driver

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
)

// This file is stage 4's mechanism: many goroutines submit to one engine's
// ring at once, and commands complete, with no lock. Up to stage 3 one global
// lock made each ring single-writer; here every step a submitter or a waiter
// takes is an atomic operation on a word with a stated writer.
//
//	submitter (SubmitBatch)                           engine (unchanged)
//	reserve  first = reserved.Add(n) - n
//	         [first, first+n) is this batch's, and so is
//	         its fence: first+n, the last index + 1
//	write    for each index i of the batch:
//	           wait for freeFor[i&mask] == i
//	             (reap i-size first if the head has passed it)
//	           encode command i into slot i&mask
//	           owner[i&mask] = its request
//	mark     written[i&mask] = i, last index first
//	publish  if publishing.CompareAndSwap(false, true):
//	           scan from the doorbell over every written slot
//	           store the new tail → RegDoorbell  ──────────► fetch: load RegDoorbell,
//	           publishing = false; look again                  run the slots below it
//	waiter   fence reached, so head > i  ◄────────────────  complete: status, then RegHead
//	         reap: claim request i (result 0 → reaping),
//	         read status[i&mask], store the result,
//	         store freeFor[i&mask] = i+size (slot free for the next lap)
//
// The words, each with who writes it (indices are free-running, as in
// stage 1, and compared only wrap-safely):
//
//	reserved      every submitter, by atomic add: the next index to hand out
//	written[k]    the submitter of the command in slot k, once it is fully
//	              written: slot k holds command written[k]
//	publishing    set by the one goroutine publishing, with CompareAndSwap;
//	              cleared by it when it is done
//	doorbell      the publishing goroutine: the driver's shadow of RegDoorbell
//	freeFor[k]    the goroutine that reaped slot k's last command, once per
//	              lap: slot k may take command freeFor[k]
//	owner[k]      the submitter of the command in slot k, before it marks
//	              it written; read by the submitter of the slot's next command
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
//   - head <= doorbell <= reserved, and reserved-head is unbounded: a
//     submitter that reserves beyond a full ring waits in "write" for its
//     slot, so a full ring is backpressure, never an error or a drop;
//   - exactly one goroutine reads the status entry of command i — the one
//     whose CompareAndSwap moves req.result from 0 to reaping — and it
//     frees the slot (freeFor = i+size) only after that read. That is what
//     stage 1's reaping under the lock guaranteed: the entry stays valid
//     until command i+size overwrites it, which cannot be written before
//     the slot is free.
//
// Who reaps: a waiter reaps its own commands once its fence has signalled;
// a submitter that needs a slot whose previous command nobody has waited
// for reaps that one. Nothing else ever has to: a slot is only needed by
// the submitter of its next command.
//
// Go's atomics are sequentially consistent, stronger than the release and
// acquire a real driver would use; the comments still name each pair.
//
// The end of the file takes the one lock off the copy path that stage 3
// added: a pinned copy finds its region in a snapshot, not under pinMu.

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
	doorbell   uint64      // shadow of RegDoorbell; touched only while holding publishing
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
// submitter wait later, for each slot, in waitForSlot.
func (r *ring) reserve(n uint64) (first uint64) {
	return r.reserved.Add(n) - n
}

// ANCHOR_END: reserve

// slotFree reports whether slot i&mask may take command i: the command it
// held a lap ago, i-size, has been reaped. This load pairs with the reaper's
// store of freeFor in reap, which comes after its read of the status.
func (r *ring) slotFree(i uint64) bool { return r.freeFor[i&r.mask].Load() == i }

// ANCHOR: waitforslot
// waitForSlot waits until slot i&mask may take command i. If the engine has
// run the slot's previous command, i-size, and nobody has reaped it — its
// waiter has not come, or never will — it reaps it itself. It reports false
// if the driver was closed first.
//
// The caller has marked and published every command of its own below i, so
// if i-size is its own (a batch longer than the ring), the engine can get
// to it.
func (d *Driver) waitForSlot(r *ring, i uint64) bool {
	return d.spin(func() bool {
		if !r.slotFree(i) {
			d.reapPassed(r, i, i+1)
		}
		return r.slotFree(i)
	})
}

// ANCHOR_END: waitforslot

// reapPassed reaps the previous command of each slot that indices
// [from, to) will take — the command a lap earlier — in order, as long as
// the engine has passed it. The caller has reserved [from, to): only it
// writes those slots' owner entries next, so each owner entry it reads is
// still the previous command's request.
func (d *Driver) reapPassed(r *ring, from, to uint64) {
	// This load pairs with the engine's store to RegHead: the status of
	// every command below head is in place.
	head := d.regs.Load(r.bank + abi.RegHead)
	for i := from; i != to && !r.slotFree(i); i++ {
		previous := i - r.size
		if int64(head-previous) <= 0 {
			return // not run yet, nor anything after it
		}
		req := r.owner[i&r.mask].Load()
		if req.index != previous {
			panic(fmt.Sprintf("driver: invariant owner[i&mask] is the request of i-size broken: slot %d holds %#x, want %#x", i&r.mask, req.index, previous))
		}
		r.reap(req)
	}
}

// ANCHOR: mark
// mark declares commands [from, to) fully written. It marks the last first:
// a publisher's scan stops at the first unmarked slot, so it finds the run
// whole, or not at all, and a batch that fits goes out under one doorbell.
func (r *ring) mark(from, to uint64) {
	for i := to; i != from; {
		i--
		// This store publishes the slot writes of command i to whoever
		// publishes it; the load in publish pairs with it.
		r.written[i&r.mask].Store(i)
	}
}

// ANCHOR_END: mark

// ANCHOR: publish
// publish moves the doorbell over every written slot after it, unless
// another goroutine is doing so already — in which case that one publishes
// the caller's slots too. It never waits. (Since stage 7 it may yield once:
// a doorbell that woke a sleeping engine hands it the thread, idle.go.)
//
// Only the holder of publishing stores the doorbell, so RegDoorbell only
// moves forward, as the device requires. The scan moves it over written
// slots only, so it never covers a slot still being written; and it ends
// within a ring: command doorbell+size cannot be written before command
// doorbell has run.
//
// No marked slot is left unpublished. A submitter marks, then tries to take
// publishing; the holder releases publishing, then looks once more at the
// slot where its scan stopped. Each side stores, then loads what the other
// stores, and Go's atomics are sequentially consistent: if the submitter's
// CompareAndSwap failed, the holder's look comes after it and sees the mark,
// and the holder goes round again.
func (d *Driver) publish(r *ring) {
	for r.publishing.CompareAndSwap(false, true) {
		tail, woke := r.doorbell, false
		// These loads pair with the stores in mark.
		for r.written[tail&r.mask].Load() == tail {
			tail++
		}
		if tail != r.doorbell {
			// This store publishes every slot write the loads above
			// saw; the engine's load of RegDoorbell in fetch pairs
			// with it.
			d.regs.Store(r.bank+abi.RegDoorbell, tail)
			woke = d.wakeIfIdle(r) // stage 7: after the store, never before (idle.go)
			r.doorbell = tail
			d.doorbells.Add(1)
		}
		if d.testHookPublishing != nil {
			d.testHookPublishing() // a test may hold publishing longer here
		}
		r.publishing.Store(false)
		if woke {
			handoff() // stage 7: run the woken engine now, not while holding publishing
		}
		// The look after the release: a slot marked while this goroutine
		// held publishing, by a submitter whose CompareAndSwap failed.
		if r.written[tail&r.mask].Load() != tail {
			return
		}
	}
}

// ANCHOR_END: publish

// ANCHOR: reap
// reap copies command req.index's status into req and frees its slot,
// unless another goroutine has claimed req first. The engine's head must
// have passed req.index.
//
// The claim is the CompareAndSwap: one reaper per command reads its status
// entry, and it stores freeFor — letting the slot's next command be written,
// and so, later, the entry be overwritten — only after that read.
func (r *ring) reap(req *request) {
	if !req.result.CompareAndSwap(resultPending, resultReaping) {
		return // reaped, or being reaped, by someone else
	}
	// A plain read: the engine wrote this entry before it stored RegHead
	// past req.index (the caller loaded that head), and nobody writes it
	// again before the store of freeFor below lets the slot be reused.
	status := abi.LoadStatus(r.status[abi.StatusOffset(req.index, r.mask):])
	// This store delivers the status; a waiter's load in collect pairs
	// with it.
	req.result.Store(resultDone | uint64(status))
	// This store frees the slot for the next lap; slotFree's load pairs
	// with it.
	r.freeFor[req.index&r.mask].Store(req.index + r.size)
}

// ANCHOR_END: reap

// spin polls done until it reports true, yielding as the engines do, and
// reports whether it did; false if the driver was closed first.
func (d *Driver) spin(done func() bool) bool {
	checkEvery := d.yieldEvery
	if checkEvery < 0 { // never yield, but still notice Close
		checkEvery = 1024
	}
	for polls := 1; ; polls++ {
		if done() {
			return true
		}
		if polls%checkEvery != 0 {
			continue
		}
		if d.closed.Load() {
			return false
		}
		if d.yieldEvery > 0 {
			runtime.Gosched()
		}
	}
}

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
// HostFree did in stage 3.
func (d *Driver) spans() []pinnedSpan {
	if p := d.pinnedSpans.Load(); p != nil {
		return *p
	}
	return nil
}

// ANCHOR_END: spans
