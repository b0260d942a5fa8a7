package softgpu_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	softgpu "softgpu/stage5-vm"
)

// BenchmarkRoundTrip is one NOP submitted and waited for: the cost of the
// submission path there and back, with nothing to do in between.
// allocs/op is part of the contract: the path allocates nothing.
func BenchmarkRoundTrip(b *testing.B) {
	for _, e := range engines {
		b.Run("engine="+e.String(), func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			b.ReportAllocs()
			m := startMeter()
			for b.Loop() {
				if err := g.Nop(e); err != nil {
					b.Fatal(err)
				}
			}
			m.report(b)
		})
	}
}

// BenchmarkFill is one 64-byte fill on the copy engine, submitted and
// waited for.
func BenchmarkFill(b *testing.B) {
	b.Run("size=64B", func(b *testing.B) {
		g := openBench(b, softgpu.Config{})
		defer g.Close()
		p := mustAlloc(b, g, 64)
		b.ReportAllocs()
		m := startMeter()
		for b.Loop() {
			if err := g.Fill(p, 64, 0xab); err != nil {
				b.Fatal(err)
			}
		}
		m.report(b)
	})
}

// BenchmarkSpinYield is RoundTrip/engine=copy with the spinning loops (both
// engines' and the host's wait) yielding every N polls, or never: what the
// yield in pollLoop buys on a machine with fewer cores than spinners.
//
// Each run stops at spinYieldDeadline and reports its own ns/op. With no
// yield anywhere a round trip costs either well under a microsecond or
// ~20 ms (until the Go scheduler preempts a spinner), and the regime can
// change between the runs go test makes to choose b.N: a b.N chosen at
// 0.6 µs and run at 20 ms would take hours. The deadline is checked every
// 16 round trips, so the clock read costs the fast rows almost nothing.
func BenchmarkSpinYield(b *testing.B) {
	for _, every := range []int{1, 64, 1024, -1} {
		name := fmt.Sprint(every)
		if every < 0 {
			name = "never"
		}
		b.Run("every="+name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{YieldEvery: every})
			defer g.Close()
			m := startMeter()
			b.ResetTimer()
			start := time.Now()
			done := 0
			for done < b.N {
				if err := g.Nop(softgpu.Copy); err != nil {
					b.Fatal(err)
				}
				done++
				if done%16 == 0 && time.Since(start) > spinYieldDeadline {
					break
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(done), "ns/op")
			m.report(b)
		})
	}
}

// spinYieldDeadline bounds one run of SpinYield (see there).
const spinYieldDeadline = 2 * time.Second

// BenchmarkRoundTripPaired is RoundTrip/engine=copy and Baseline/handoff
// measured in turns within one run, and their ratio: the figure the
// whole-stack chapter reads stage by stage, taken from the two at the same
// moment of the machine.
//
// Why a row of its own: on the 2-vCPU development machine the two vCPUs'
// placement moves within seconds, and with it every cache-line transfer —
// on one afternoon the handoff read 82 to 607 ns from one run of it to the
// next. RoundTrip and Baseline/handoff are separate rows, run seconds
// apart, so their quotient can put a round trip measured in one placement
// over a floor measured in another. Here each side gets a turn of
// pairedTimed round trips (a few milliseconds), then the other does, and
// each round trip turn is read against the handoff turn that follows it.
//
// The device and the bare ring are never up at once: the device's engines
// spin, and beside them the ring's two goroutines would be measuring the
// scheduler. So each turn opens its device, or starts its ring, and
// closes it after. A device just opened is slow for a while: in stage 4,
// blocks of 512 round trips read 1 to 15 µs each for up to ~16 ms after
// Open, against ~230 ns after, with or without a garbage collection
// forced first, and in some opens not at all. A turn times nothing
// until it has run for pairedWarm; a first version of this benchmark,
// which timed from the 257th round trip, read stage 4's ratio 1.65-1.68
// where this one read 1.46-1.62 in the same minutes.
//
// Reported: the median over turns of the round trip (roundtrip-ns) and
// of the handoff (handoff-ns), and the median of the per-pair quotients
// (ratio). ns/op is go test's own, the wall time per round trip with the
// opens and closes: how long the row took, not a latency.
func BenchmarkRoundTripPaired(b *testing.B) {
	withCanary(b)
	turns := inTurns(b, 2, func(side int) (op func(), end func()) {
		if side == 1 {
			r := startHandoff()
			return r.roundTrip, r.stop
		}
		return openRoundTrip(b)
	})
	if turns == nil {
		return // a run too short for one round of turns: no figures
	}
	ratios := make([]float64, len(turns[0])) // each round trip turn over the handoff turn after it
	for i := range ratios {
		ratios[i] = turns[0][i] / turns[1][i]
	}
	b.ReportMetric(median(turns[0]), "roundtrip-ns")
	b.ReportMetric(median(turns[1]), "handoff-ns")
	b.ReportMetric(median(ratios), "ratio")
}

// BenchmarkRoundTripStepped is RoundTrip/engine=copy on a stepped device
// (device/stepped.go): the driver's hook after the doorbell runs the
// engine's side of the NOP on the submitter's goroutine, so the whole
// round trip — the host's submission, the engine's fetch, execution and
// completion, the host's wait — runs on one core, with nothing to cross
// to another. It is the round trip's own code, timed alone: what is left
// of RoundTrip when the cache lines cost nothing to move.
func BenchmarkRoundTripStepped(b *testing.B) {
	op, end := openStepped(b)
	defer end()
	b.ReportAllocs()
	for b.Loop() {
		op()
	}
}

// BenchmarkRoundTripFloor puts a round trip beside what it is made of, in
// turns as RoundTripPaired does: a turn of RoundTrip/engine=copy, one of
// Baseline/handoff (the ring's three cache lines crossing between two
// cores, with almost no code), one of RoundTripStepped (all of the round
// trip's code, with no crossing). Neither of the last two is a round trip.
// Their sum is what one would cost if every instruction of both sides lay
// between the doorbell and the completion the host sees; it does not. The
// engine's bookkeeping after it stores a completion runs while the host
// reads it, and the host's after it sees one runs while the engine polls,
// so on two cores a round trip comes in under the sum. What it pays over
// the bare handoff is the part of its code that does lie on that path.
//
// Reported: the medians over turns of each side (roundtrip-ns, handoff-ns,
// stepped-ns); the median over rounds of the round trip over the sum of
// the two turns after it (floor-ratio), above 1 only if a round trip pays
// for something beyond the bare ring's crossings and all of its code — a
// wait that yields or sleeps, or lines the bare ring does not move, which
// cost the more the farther apart the two vCPUs sit; and the median over
// rounds of the round trip's excess over the handoff as a share of the
// stepped turn (onpath-share): in a placement where crossings are cheap,
// how much of the stage's code its round trip cannot overlap.
func BenchmarkRoundTripFloor(b *testing.B) {
	withCanary(b)
	turns := inTurns(b, 3, func(side int) (op func(), end func()) {
		switch side {
		case 1:
			r := startHandoff()
			return r.roundTrip, r.stop
		case 2:
			return openStepped(b)
		}
		return openRoundTrip(b)
	})
	if turns == nil {
		return
	}
	ratios := make([]float64, len(turns[0]))
	shares := make([]float64, len(turns[0]))
	for i := range ratios {
		rt, handoff, stepped := turns[0][i], turns[1][i], turns[2][i]
		ratios[i] = rt / (handoff + stepped)
		shares[i] = (rt - handoff) / stepped
	}
	b.ReportMetric(median(turns[0]), "roundtrip-ns")
	b.ReportMetric(median(turns[1]), "handoff-ns")
	b.ReportMetric(median(turns[2]), "stepped-ns")
	b.ReportMetric(median(ratios), "floor-ratio")
	b.ReportMetric(median(shares), "onpath-share")
}

// BenchmarkRoundTripBesideSpinner measures the floor under a round trip in
// a stage whose idle compute engine polls beside it — stages 0 to 4 —
// taking turns as RoundTripFloor does: a turn of RoundTrip/engine=copy,
// one of the bare handoff, and three of the handoff run as a stage runs
// its round trip
// (spinningHandoff, spinning_ring_test.go): its two loops yielding on
// spin's cadence with nothing beside them (cadence-ns); beside a third
// loop that spins and yields on the same cadence, as the idle compute
// engine did until it gave way (spinner-ns); and beside a third loop that
// yields after every empty poll, as the idle compute engine does once it
// has found nothing for spin.GiveWayAfter (eager-ns).
//
// Why: Baseline/handoff has two loops on two cores, and a stage before 7
// has three. RoundTripFloor's floor-ratio, above 1 in those stages only,
// says that something besides the crossings and the code lies on their
// round trip's path; this row measures what a third spinning loop costs
// the crossings by itself, with no stage's code in any of the three. Its
// poll is one load, cheaper than an engine's, so it reaches
// spin.YieldAfter in fewer polls and holds a P for about the cadence's
// interval: the floor of the cadence, not of any one engine's loop.
//
// Reported: the medians over turns of each side (roundtrip-ns,
// handoff-ns, cadence-ns, spinner-ns, eager-ns), and the medians over
// rounds of three quotients, each side over a turn of the same round:
// spinner-ratio, the spinner turn over the handoff turn — what the third
// loop and the cadence cost the handoff; eager-ratio, the eager turn over
// the handoff turn — what is left of that when the third loop gives way
// at once; and ratio, the round trip over the spinner turn — what the
// stage adds to the floor it stands on. From stage 7 on the idle compute
// engine sleeps and the spinner turn is no longer under the round trip;
// there ratio reads what the gating took away.
func BenchmarkRoundTripBesideSpinner(b *testing.B) {
	withCanary(b)
	idlers := []idler{noIdler, cadenceIdler, eagerIdler} // sides 2, 3 and 4
	turns := inTurns(b, 2+len(idlers), func(side int) (op func(), end func()) {
		switch side {
		case 0:
			return openRoundTrip(b)
		case 1:
			r := startHandoff()
			return r.roundTrip, r.stop
		}
		r := startSpinningHandoff(idlers[side-2])
		return r.roundTrip, r.stop
	})
	if turns == nil {
		return
	}
	rounds := len(turns[0])
	spinner, eager, ratio := make([]float64, rounds), make([]float64, rounds), make([]float64, rounds)
	for i := range rounds {
		roundTrip, handoff := turns[0][i], turns[1][i]
		spinner[i] = turns[3][i] / handoff
		eager[i] = turns[4][i] / handoff
		ratio[i] = roundTrip / turns[3][i]
	}
	for side, unit := range []string{"roundtrip-ns", "handoff-ns", "cadence-ns", "spinner-ns", "eager-ns"} {
		b.ReportMetric(median(turns[side]), unit)
	}
	b.ReportMetric(median(spinner), "spinner-ratio")
	b.ReportMetric(median(eager), "eager-ratio")
	b.ReportMetric(median(ratio), "ratio")
}

// openRoundTrip opens a device for a turn of round trips: one is a NOP on
// the copy engine, submitted and waited for.
func openRoundTrip(b *testing.B) (op func(), end func()) {
	g, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := g.Nop(softgpu.Copy); err != nil {
			b.Fatal(err)
		}
	}, func() { g.Close() }
}

// openStepped is openRoundTrip on a stepped device (OpenStepped).
func openStepped(b *testing.B) (op func(), end func()) {
	g, stop, err := softgpu.OpenStepped(softgpu.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return func() {
		if err := g.Nop(softgpu.Copy); err != nil {
			b.Fatal(err)
		}
	}, stop
}

// inTurns gives sides turns until b.Loop ends: side 0's, side 1's, and so
// on round. A turn starts its side (start, which returns one operation and
// how to end the turn), runs it untimed for pairedWarm, times pairedTimed
// operations, and ends it, so that no two sides are ever up at once. It
// returns each side's ns per operation, turn by turn, for the complete
// rounds only — turns[s][i] is side s's turn in round i — or nil if there
// was not one. b.Loop counts every operation, timed or not.
func inTurns(b *testing.B, sides int, start func(side int) (op func(), end func())) [][]float64 {
	turns := make([][]float64, sides)
	cur, n := 0, -1 // the side whose turn it is; its timed operations, -1 while warming
	op, end := start(cur)
	began := time.Now() // the turn's start, then its timed part's
	for b.Loop() {
		op()
		if n < 0 {
			if time.Since(began) >= pairedWarm {
				n, began = 0, time.Now()
			}
			continue
		}
		if n++; n < pairedTimed {
			continue
		}
		ns := float64(time.Since(began).Nanoseconds()) / pairedTimed
		end()
		turns[cur] = append(turns[cur], ns)
		cur, n = (cur+1)%sides, -1
		op, end = start(cur)
		began = time.Now()
	}
	end()
	rounds := len(turns[sides-1])
	if rounds == 0 {
		return nil
	}
	for s := range turns {
		turns[s] = turns[s][:rounds]
	}
	return turns
}

// pairedWarm and pairedTimed are a RoundTripPaired turn: how long it runs
// round trips untimed after the device opens or the ring starts (about
// twice the longest slow start measured), then how many it times.
const (
	pairedWarm  = 30 * time.Millisecond
	pairedTimed = 16384
)

// median is the lower middle of xs, an observed value.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
