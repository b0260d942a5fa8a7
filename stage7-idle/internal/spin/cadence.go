// Package spin is when the busy-wait loops of the device and the driver
// yield — an idle engine polling its doorbell, a host polling for a
// completion: after a stated time spinning, not after a number of polls.
//
// A cadence counted in polls is a cadence in time only while a poll costs
// what it cost when the count was chosen. Make the poll cheaper (an inlined
// register load, a line that stays in the cache) and the same count yields
// more often per second: the loop spends more of its time in the scheduler
// and the other spinners wait behind more yields. A cadence in time does not
// move when the poll does.
//
// The clock is not free. time.Since reads the monotonic clock through the
// vDSO, and what that costs depends on the clock source the hypervisor
// gives the guest: on the 2-vCPU development machine it took ~175 ns when
// the cadence was chosen, and 36–41 ns on a later day with the kernel on
// the tsc clock source (a bare benchmark of time.Since run by hand, three
// runs; no record times it) — against ~7 ns for the load of a line that
// stays in the cache and ~16 ns for an idle engine's whole empty poll
// (hand timings too). Read on every poll, it would cut
// the polls by three to ten times. A loop reads the clock once every
// CheckEvery polls instead, and the yield comes at most that many polls
// after YieldAfter. The read still makes the average empty poll longer (by
// a third to twice); what it delays is how soon a poll sees its change, by
// at most one read, a fraction of a round trip.
//
// Invariant: a Cadence belongs to one loop on one goroutine (a field of
// the engine, which only the engine's goroutine touches, or a local of one
// wait); nothing in it is shared.
package spin

import "time"

// YieldAfter is how long a loop spins between yields.
//
// A yield is also how a goroutine just made runnable — the host back from
// a wake, an interrupt handler, a woken waiter — gets a P from a spinner,
// so the interval is paid by every wake-up as well as saved by every loop.
// It was chosen by measurement, old and new test binaries run in turn on
// the loaded 2-vCPU development machine (scratch runs, in no record): at
// 2 µs, and at 1 µs or 500 ns with a clock read every 16 polls, RoundTrip
// and FenceSignal were slower than with the old 64 polls (2 µs: two to
// three times) in stages 0, 3, 4 and 7; at 250 ns with a read every 8
// polls they were as fast or faster in those runs. The records read it
// closer: RoundTrip/engine=copy at this cadence over SpinYield/every=64
// (the old count, kept as a knob), pass by pass in one placement, is 0.89
// in stage 0, 1.02 in stage 3, 0.95 in stage 4 and 1.03 in stage 7 at the
// median in the roundtrip record at f0bd540 (0.96, 1.05, 1.06 and 1.11 in
// the stages record): within the noise of each other, and in stages 3 and
// 7 a little slower in most passes. With the read, that is a yield every
// two to three checks, about a microsecond of CPU, close to what 64 polls
// came to in stage 3's idle engine (~1.2 µs of CPU per yield by the hand
// timings above; no record measures CPU per yield).
const YieldAfter = 250 * time.Nanosecond

// GiveWayAfter is how long a loop with nothing in view — an engine whose
// doorbell has not moved — spins on the cadence before it yields after
// every empty poll instead (Cadence.Idle).
//
// Every spinning loop pays the others for the time it holds a P between
// yields: with three spinners on two cores, while one holds a P the
// goroutine it displaced waits. A loop with work in view — a host waiting
// for the completion of a command it just queued, an engine between the
// commands of a stream — should hold its P for a while, or it pays a trip
// through the run queue for every poll it gives up. A loop that has found
// nothing for a while should hold its P no longer than one poll: the
// RoundTripBesideSpinner benchmark measures the difference, a bare handoff
// beside a third loop on the cadence and beside one that yields after every
// empty poll.
const GiveWayAfter = 10 * time.Microsecond

// CheckEvery is how many polls a loop makes between reads of the clock
// (see the package comment for why not every poll).
const CheckEvery = 8

// base is the origin of the loops' clock readings. It carries Go's
// monotonic reading, so the readings never jump with the wall clock.
var base = time.Now()

// now is the time since base in nanoseconds; a variable so that a test can
// stand a clock it controls in its place.
var now = func() int64 { return int64(time.Since(base)) }

// Cadence decides when one spinning loop yields.
type Cadence struct {
	every     int   // > 0: every that many polls, counted; < 0: never; 0: by time
	next      int64 // now() at or after which the loop yields; 0: start the interval at the next check
	began     int64 // Idle: now() at the spin's first check
	givingWay bool  // Idle: the spin has lasted GiveWayAfter; yield after every poll
}

// NewCadence returns the cadence a Config's YieldEvery asks for. Zero, the
// default, yields after YieldAfter of spinning. A positive count yields
// every that many polls instead — the old cadence, kept as a knob so that
// SpinYield can still measure what a count costs — and a negative one never
// yields.
func NewCadence(every int) Cadence { return Cadence{every: every} }

// ANCHOR: due

// Due reports whether a loop that has just made its polls-th empty poll
// since it began spinning should yield now. The loop counts polls from 1
// and starts again from 1 when it finds work; Due sees a count of
// CheckEvery as the start of a new spin. Time the loop spends in the yield
// itself is not spinning: the next interval starts at the first check after
// the yield returns.
func (c *Cadence) Due(polls int) bool {
	if c.every != 0 {
		return c.every > 0 && polls%c.every == 0
	}
	if polls%CheckEvery != 0 {
		return false
	}
	return c.check(polls, now())
}

// check is Due's decision at a check, the clock read at t.
func (c *Cadence) check(polls int, t int64) bool {
	if polls == CheckEvery || c.next == 0 {
		c.next = t + int64(YieldAfter)
		return false
	}
	if t < c.next {
		return false
	}
	c.next = 0
	return true
}

// ANCHOR_END: due

// ANCHOR: idle

// Idle is Due for a loop with nothing in view: on the cadence until the
// spin has lasted GiveWayAfter, counted from its first check with the
// yields in it, and after every empty poll from then until the loop finds
// work and counts from 1 again. A count (every) keeps its meaning: Idle
// is then Due.
func (c *Cadence) Idle(polls int) bool {
	if c.every != 0 {
		return c.Due(polls)
	}
	if polls == 1 {
		c.givingWay = false // a new spin
	}
	if c.givingWay {
		return true
	}
	if polls%CheckEvery != 0 {
		return false
	}
	t := now()
	if polls == CheckEvery {
		c.began = t
	}
	if t-c.began >= int64(GiveWayAfter) {
		c.givingWay = true
		return true
	}
	return c.check(polls, t)
}

// ANCHOR_END: idle

// GivingWay reports whether the spin Idle is timing has lasted
// GiveWayAfter: Idle yields at every poll.
func (c *Cadence) GivingWay() bool { return c.givingWay }
