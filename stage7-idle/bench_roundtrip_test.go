package softgpu_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	softgpu "softgpu/stage7-idle"
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
// over a floor measured in another. Here each side gets pairedTimed round
// trips (a millisecond or so), then the other does, and each round trip
// block is read against the handoff block that follows it.
//
// The device and the bare ring are never up at once: the device's engines
// spin, and beside them the ring's two goroutines would be measuring the
// scheduler. So each block opens its device, or starts its ring, and
// closes it after; the first pairedWarm round trips of a block are not
// timed.
//
// Reported: the median over blocks of the round trip (roundtrip-ns) and
// of the handoff (handoff-ns), and the median of the per-pair quotients
// (ratio). ns/op is go test's own, the wall time per round trip with the
// opens and closes: how long the row took, not a latency.
func BenchmarkRoundTripPaired(b *testing.B) {
	withCanary(b)
	// start begins side k's block: 0 the device's round trip, 1 the bare
	// ring's. It returns one round trip and how to end the block.
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
	var blocks [2][]float64 // ns per round trip of each timed block, per side
	var ratios []float64    // each round trip block over the handoff block after it
	cur, n := 0, 0          // the side whose block it is, and its round trips so far
	op, end := start(cur)
	var began time.Time
	for b.Loop() {
		if n == pairedWarm {
			began = time.Now()
		}
		op()
		n++
		if n < pairedWarm+pairedTimed {
			continue
		}
		ns := float64(time.Since(began).Nanoseconds()) / pairedTimed
		end()
		blocks[cur] = append(blocks[cur], ns)
		if cur == 1 {
			ratios = append(ratios, blocks[0][len(blocks[0])-1]/ns)
		}
		cur, n = 1-cur, 0
		op, end = start(cur)
	}
	end()
	if len(ratios) == 0 {
		return // a run too short for one pair: no figures
	}
	b.ReportMetric(median(blocks[0]), "roundtrip-ns")
	b.ReportMetric(median(blocks[1]), "handoff-ns")
	b.ReportMetric(median(ratios), "ratio")
}

// pairedWarm and pairedTimed are RoundTripPaired's block: round trips
// untimed after the device opens or the ring starts, then round trips
// timed.
const (
	pairedWarm  = 256
	pairedTimed = 2048
)

// median is the lower middle of xs, an observed value.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
