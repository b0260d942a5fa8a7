package device

import (
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/mmio"
)

// The adaptive idle budget (IdleAdaptive). A fixed budget fits one length
// of gap: a 50 µs budget spins through every gap shorter than that and pays
// a wake-up for every longer one — after spinning 50 µs for nothing. KVM's
// halt-polling faced the same choice and grows and shrinks each vCPU's poll
// window from how its last waits ended (halt_poll_ns_grow and _shrink).
// This engine does the same with a little more memory: it keeps the lengths
// of its last adaptiveHistory gaps, and after each one it spins, for the
// next, with the budget that would have cost least over them.
//
// The cost of a budget B over a gap g, in cycles:
//
//	g <= B   g       the engine spun through the gap: no wake-up
//	g >  B   B + W   it spun B for nothing, slept, and paid a wake-up, W
//
// W, the price of a wake-up, is 100 µs of spinning. A wake costs the core
// little — a few microseconds of the waker's and the engine's threads (no
// record measures that part apart) — but it costs the command that waits
// for it 8 to 14 µs of latency at the median (IdleWake, idle record at
// 885b3ad), which is what an idle policy is for; W weighs that at twice
// the hybrid default's judgement that a wake is worth 50 µs of spinning.
// With a W of 50 µs the engine gave up spinning for gaps of ~50 µs — what
// a 30 µs sleep of the host's really lasts here (Gap/gap=30us, 51 µs of
// gap-ns at the median in that record) — and paid a wake for every one
// (no record has W = 50 µs). The best B is always 0, the min, the max, or one
// of the gaps seen (between them the cost only grows with B), so the engine
// tries those, within [RegIdleBudgetMin, RegIdleBudgetMax], and on a tie
// takes the smaller: every budget from the longest gap up costs the same
// over the gaps seen, and the smallest of them spins least in a gap that is
// longer than any of those.
//
// The gaps seen stand in for the gaps to come, and the budget that cost
// least over them is exactly the longest gap it spun through: the next gap
// a hair longer misses it and pays a wake. On gaps that lengthen — a
// workload slowing down — that is every gap; and among gaps that only
// scatter, the next is longer than all of the last 16 about one time in
// 17. So the budget gets headroom, as KVM's halt-polling grows its window
// by a factor rather than to the wait it just saw: once the best budget
// spins through some gap, the engine spins for half as long again as the
// longest such gap (within the max). A budget that covers no gap is not
// raised: the min already means "sleep almost at once". Measured against
// the default with IdleMixPaired, the headroom took away the runs in which
// adaptive's 99th percentile on mix=drift was ~1.7 times the default's
// (three of six interleaved runs without it, none of six with it; commit
// 6a999b7, in no record), at the same bill. With it, the idle-paired
// record at 885b3ad reads that ratio at 0.996 to 1.025 in its five passes,
// at 0.79 times the default's CPU.
//
// What it converges to, for a steady gap G, within the bounds: B = 1.5 G
// if G < W — spin through every gap, never wake — and otherwise B = the
// min: spin as little as it may, and pay the wake a fixed budget would
// have paid anyway. With the default bounds (abi.DefaultIdleBudgetMin and
// Max, 25 and 60 µs) that is: spin through steady gaps up to 60 µs, and
// poll 25 µs before each longer one. This is the ski-rental rule: rent
// (spin) while renting costs less than buying (a wake). For a workload
// whose gaps change, it follows them within adaptiveHistory gaps.
//
// A gap is measured as the engine can see it: from its budget's first look
// at the clock (idleSince) to the end of a sleep, or, for a gap it spun
// through, to the start of the next idle spell — which adds the time of the
// commands in between, a slight overestimate that only errs towards
// sleeping. The clock is read only then, after the command has run: never
// between a doorbell and its command.

// adaptiveHistory is how many gaps the budget is chosen over.
const adaptiveHistory = 16

// wakeCost is W above, in cycles.
const wakeCost = 2 * abi.DefaultIdleBudget

// adaptive is an engine's learnt budget. Private to the engine goroutine.
type adaptive struct {
	budget uint64                  // cycles
	gaps   [adaptiveHistory]uint64 // the last gaps, in cycles; gaps[i%len] is gap number i
	n      int                     // gaps recorded so far
	noted  uint64                  // a gap measured but not yet recorded (note, learn)
	isNew  bool                    // noted holds one
}

// note keeps a gap's length until the engine is idle enough to learn from
// it (learn).
func (a *adaptive) note(gap uint64) { a.noted, a.isNew = gap, true }

// learn records the gap noted last, if there is one and the engine is
// adaptive, chooses the budget for the next gap and publishes it in
// RegIdleBudgetNow. The engine calls it only when idle — at its first
// empty poll after a command, and on its way to sleep — never between a
// doorbell and its command: the choice weighs every candidate budget over
// the last gaps, and a gap that ended in a sleep ends with a command
// waiting.
func (e *Engine) learn() {
	a := &e.adaptive
	if !a.isNew {
		return
	}
	a.isNew = false
	if abi.IdleMode(e.regs.Load(e.controlPage+abi.RegIdleMode)) != abi.IdleAdaptive {
		return
	}
	a.record(a.noted, e.regs, e.controlPage)
	e.regs.Store(e.statusPage+abi.RegIdleBudgetNow, a.budget)
}

// record notes a gap of gap cycles and picks the budget for the next one,
// within the bounds in the engine's control page. Only an adaptive engine
// records its gaps: the choice costs a few hundred operations, nothing
// beside a gap, but nothing any other mode should pay.
func (a *adaptive) record(gap uint64, regs *mmio.Registers, controlPage uint64) {
	a.gaps[a.n%adaptiveHistory] = gap
	a.n++
	lo, hi := regs.Load(controlPage+abi.RegIdleBudgetMin), regs.Load(controlPage+abi.RegIdleBudgetMax)
	a.budget = bestBudget(a.gaps[:min(a.n, adaptiveHistory)], lo, hi)
}

// bestBudget is the rule above, as a pure function: the budget in [lo, hi]
// that would have cost least over gaps, with headroom over the longest gap
// it spins through. Bounds given the wrong way round are read as the
// narrower of the two.
func bestBudget(gaps []uint64, lo, hi uint64) uint64 {
	if hi < lo {
		hi = lo
	}
	best, bestCost := lo, cost(gaps, lo)
	try := func(b uint64) {
		if b < lo || b > hi {
			return
		}
		if c := cost(gaps, b); c < bestCost || (c == bestCost && b < best) {
			best, bestCost = b, c
		}
	}
	try(hi)
	for _, g := range gaps {
		try(g)
	}
	// Headroom: half as long again as the longest gap the best budget
	// spins through, within the max.
	var covered uint64
	for _, g := range gaps {
		if g <= best && g > covered {
			covered = g
		}
	}
	if covered > 0 {
		best = max(best, covered+min(covered/2, hi-covered)) // covered <= best <= hi: no overflow
	}
	return best
}

// cost is what spinning for budget b would have cost over gaps, in cycles
// (saturating, so that absurd gaps cannot wrap it).
func cost(gaps []uint64, b uint64) uint64 {
	var total uint64
	for _, g := range gaps {
		c := g
		if g > b {
			c = b + wakeCost
		}
		if total+c < total {
			return ^uint64(0)
		}
		total += c
	}
	return total
}
