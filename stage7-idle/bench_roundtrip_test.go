package softgpu_test

import (
	"fmt"
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
