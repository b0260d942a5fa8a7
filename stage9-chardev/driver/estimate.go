package driver

import (
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
)

// A hybrid wait sized by what it waits for. The default hybrid wait polls
// DefaultPollBudget and then blocks, whatever it waits for; a copy that is
// bound to take longer than that — 1 MiB takes about as long as the budget
// — then always pays a wake-up on top of its copy. The driver knows the size
// of each COPY it queues, so for a synchronous copy it estimates when the
// engine will complete it and polls through that moment instead (budget).
//
// The estimate, per channel:
//
//	rate      picoseconds per byte: an exponentially weighted moving average
//	          (weight 1/4) over recent completed copies of at least
//	          MinEstimatedCopy bytes, each timed on the device's clock
//	          (RegTimestamp, cycles of 1 ns) from just after its doorbell to
//	          its completion; zero until the first such copy completes
//	busyUntil the device clock at which the copies queued on the channel so
//	          far are expected to have completed: a copy queued now is
//	          expected at max(now, busyUntil) + bytes × rate
//
// A copy is a sample of the rate only if nothing was expected ahead of it
// (busyUntil ≤ now when it was queued): its time is then its own, not that
// of the work queued before it. Its completion is taken as the clock when
// the waiter saw it, if the waiter was polling (within a poll of the truth),
// or the engine's stamp of its fence (RegFenceCycles), if the waiter slept
// and the fence is the copy's own. Each completion also moves busyUntil by
// how late or early the copy was, so that one bad estimate does not push
// every later one off.
//
// What counts: COPY commands, and only on the synchronous Submit. Anything
// else queued ahead of a copy (a FILL, a DELAY, another channel's use of the
// same memory) is not in the estimate, which then comes out short; a short
// estimate costs a wake-up, as before, never a lost one — the wait ends in
// the same block as ever. A long one costs polling, up to the cap.
//
// The budget a copy's wait gets (budgetFor):
//
//	no estimate (no rate yet, a small copy, or an explicit PollBudget):
//	                             the channel's PollBudget, as before
//	expected in more than MaxSizedPoll:
//	                             no polling: block at once, woken by the
//	                             interrupt, as a long wait always was
//	otherwise:                   the time to the expected completion plus
//	                             PollBudget, at most MaxSizedPoll
//
// The budget past the expected completion is PollBudget because that is
// the default budget's own bet, argued at DefaultPollBudget: poll about as
// long as blocking would cost, and a wait that then blocks has paid at most
// twice the best it could have done. A copy is a wait that cannot end
// before its expected completion, so polling up to then is not part of the
// bet; the bet starts there. (An earlier version polled a quarter past the
// expectation instead, and a copy that came later than that paid a
// wake-up on top of the time it had polled: in the copies record taken at
// 3b09376, stage 3's pinned 1 MiB H2D copy at the defaults ran at 0.84 of
// its rate with a fixed 150 µs budget, at the median of five passes
// (git show 41af9a7:book/records/copies.json). With the budget past the
// expectation, the copies record at 885b3ad reads the two waits,
// interleaved copy by copy (CopyWaitAlternate/dir=H2D/size=1MiB), at a
// rate-ratio of 1.00 in stage 3, 0.94 to 1.20 over five passes.)
//
// The estimate only ever lengthens the default budget. An explicit
// Config.PollBudget (or SOFTGPU_POLL_BUDGET in the benchmarks) turns the
// estimate off: the caller asked for that budget, and gets it for every
// wait.
//
// Concurrency: rate and busyUntil are atomics, updated by compare-and-swap
// by any submitter or waiter; no lock is taken. A lost race between two
// updates can only skew an estimate, and an estimate decides only how long
// a wait polls before it blocks — never whether it blocks: the block is the
// same as without the estimate, with its own argument against a lost
// wake-up (fence.go).

// MaxSizedPoll is the longest a sized wait polls: 500 µs. Beyond it a
// wake-up is cheap in proportion. MACHINE.md's hand probes put waking a
// parked goroutine, with no thread at hand to run it, at about 72 µs at the
// median, and a futex wake of a thread idle for 2 ms at about 45 µs; this
// device does better, since the engine that completes a copy lends its
// thread to the waiter it wakes: in the stages record at f0bd540 a blocked
// waiter runs again 0.9 µs after its fence at the median in stage 2, 2.8 µs
// at the 99th percentile (FenceSignal/irq=direct), and in the idle record
// at 885b3ad a bare futex wake after 3 ms idle takes 11 µs at the median
// (Baseline/wake/gap=3ms). Spinning longer buys back at most that, while
// holding one of the two cores that the engines share. A copy
// expected later than this does not poll at all: polling the cap and then
// blocking would pay both.
const MaxSizedPoll = 500_000

// MinEstimatedCopy is the least COPY the estimate covers, 64 KiB. A smaller
// copy completes well within DefaultPollBudget (in the copies record at
// 885b3ad, stage 3, a pinned 64 KiB copy took 2.3 µs to the device and
// 8.8 µs from it, medians of five passes), so no estimate could change its
// wait; and its time is mostly the doorbell and the completion, not its
// bytes, so as a sample it would make the per-byte rate look slower than
// it is.
const MinEstimatedCopy = 64 << 10

// maxRate bounds a sample, in picoseconds per byte (1 µs per byte), so that
// bytes × rate cannot overflow for any copy device memory can hold.
const maxRate = 1_000_000

// copyEstimate is one channel's estimate; see the file comment.
type copyEstimate struct {
	enabled   bool          // set by newChannel: the budget is the default one
	rate      atomic.Uint64 // picoseconds per byte, an EWMA; 0: nothing learned yet
	busyUntil atomic.Uint64 // device clock when the copies queued so far are expected done
}

// expectation is what a waiter knows of its command when it waits: taken by
// expect just after the doorbell, so start is no earlier than the engine
// could have begun.
type expectation struct {
	bytes uint64 // bytes the COPY moves; 0: not a copy the estimate covers
	start uint64 // the device clock just after the doorbell
	due   uint64 // the expected completion; 0: no rate learned yet
	alone bool   // nothing was expected ahead of it and it woke no engine: its time is a sample
}

// ANCHOR: expect

// expect returns what the waiter of a command with op and size, just
// queued on ch, may expect — the zero expectation for a command the
// estimate does not cover — and adds the command's expected time to the
// channel's queue. woke is whether the command's doorbell woke the engine
// (publish).
//
// A copy whose doorbell woke the engine is not a sample of the rate. The
// publisher handed the woken engine its thread (handoff, idle.go) before
// expect read the clock, and the engine may have copied for a while by
// then: measured from start, such a copy looks faster than copies run. A
// rate learnt from those comes out fast, the copies after it are expected
// too soon, and their waits block: in stage 7, with the host writing a
// megabyte between copies (long enough for the engine to be asleep at
// most doorbells: wakes/op 0.85 at the median in the copies record at
// 885b3ad), one wait in five blocked at the defaults before this rule and
// the copies were slower than with a 150 µs poll (commit 674ff8d, in no
// record). With it, that record's CopyWaitAlternate reads the default at
// 1.007 times the poll's rate at the median (0.98 to 1.02 over five passes).
func (ch *Channel) expect(op abi.Opcode, size uint64, woke bool) expectation {
	e := &ch.estimate
	if !e.enabled || op != abi.OpCopy || size < MinEstimatedCopy {
		return expectation{}
	}
	now := ch.regs.Load(abi.RegTimestamp)
	rate := e.rate.Load()
	cost := size * rate / 1000
	for {
		ahead := e.busyUntil.Load()
		begin := max(now, ahead)
		if e.busyUntil.CompareAndSwap(ahead, begin+cost) {
			exp := expectation{bytes: size, start: now, alone: ahead <= now && !woke}
			if rate != 0 {
				exp.due = begin + cost
			}
			return exp
		}
	}
}

// ANCHOR_END: expect

// ANCHOR: budget

// budgetFor returns how long a hybrid wait for a command with exp polls
// before it blocks, or block = true if it should block at once.
func (ch *Channel) budgetFor(exp expectation) (budget uint64, block bool) {
	if exp.due == 0 {
		return ch.pollBudget, false
	}
	remaining := exp.due - exp.start
	if remaining > MaxSizedPoll {
		return 0, true
	}
	return min(remaining+ch.pollBudget, MaxSizedPoll), false
}

// ANCHOR_END: budget

// completedCopy tells the estimate that the command with exp completed at
// end (device clock): a sample of the rate if it was alone, and in any case
// a correction of the queue by how late or early it came.
func (ch *Channel) completedCopy(exp expectation, end uint64) {
	e := &ch.estimate
	if exp.bytes == 0 || int64(end-exp.start) <= 0 {
		return
	}
	if exp.alone {
		e.learn(min((end-exp.start)*1000/exp.bytes, maxRate))
	}
	if exp.due == 0 {
		return
	}
	for {
		busy := e.busyUntil.Load()
		// busy - due is what was expected after this copy; it now starts
		// at end. (Wrap-safe: the clock is far from wrapping, but the
		// difference may be negative if the queue was re-anchored
		// since.)
		next := busy - exp.due + end
		if int64(next-end) < 0 {
			next = end
		}
		if e.busyUntil.CompareAndSwap(busy, next) {
			return
		}
	}
}

// learn folds one sample, in picoseconds per byte, into the rate.
func (e *copyEstimate) learn(sample uint64) {
	for {
		old := e.rate.Load()
		next := sample
		if old != 0 {
			next = uint64(int64(old) + (int64(sample)-int64(old))/4)
		}
		if e.rate.CompareAndSwap(old, max(next, 1)) {
			return
		}
	}
}

// fenceEnd returns when the engine completed command i by its fence's
// stamp, and whether the stamp may be taken as i's: RegFence reads i+1 (no
// later fence has replaced it) and the stamp is later than start. The
// stamp is stored just after the fence (device/fence.go, signal), so a
// reader may see i's fence with an earlier command's stamp; start rules
// out every stamp from before i's doorbell, and what remains — a command
// the estimate did not count, completed after the doorbell — makes one
// sample short, which the average then carries at a quarter's weight.
func (ch *Channel) fenceEnd(i, start uint64) (uint64, bool) {
	if ch.regs.Load(ch.status+abi.RegFence) != i+1 {
		return 0, false
	}
	stamp := ch.regs.Load(ch.status + abi.RegFenceCycles)
	return stamp, int64(stamp-start) > 0
}
