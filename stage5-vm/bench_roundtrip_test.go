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
	// start begins side k's turn: 0 the device's round trip, 1 the bare
	// ring's. It returns one round trip and how to end the turn.
	start := func(k int) (op func(), end func()) {
		if k == 1 {
			r := startHandoff()
			return r.roundTrip, r.stop
		}
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
	var turns [2][]float64 // ns per round trip of each timed turn, per side
	var ratios []float64   // each round trip turn over the handoff turn after it
	cur, n := 0, -1        // the side whose turn it is; its timed round trips, -1 while warming
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
		if cur == 1 {
			ratios = append(ratios, turns[0][len(turns[0])-1]/ns)
		}
		cur, n = 1-cur, -1
		op, end = start(cur)
		began = time.Now()
	}
	end()
	if len(ratios) == 0 {
		return // a run too short for one pair: no figures
	}
	b.ReportMetric(median(turns[0]), "roundtrip-ns")
	b.ReportMetric(median(turns[1]), "handoff-ns")
	b.ReportMetric(median(ratios), "ratio")
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
