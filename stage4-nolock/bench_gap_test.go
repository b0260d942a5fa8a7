package softgpu_test

import (
	"testing"
	"time"

	softgpu "softgpu/stage4-nolock"
)

var gaps = []struct {
	name string
	d    time.Duration
}{{"0", 0}, {"3us", 3 * time.Microsecond}, {"30us", 30 * time.Microsecond},
	{"300us", 300 * time.Microsecond}, {"3ms", 3 * time.Millisecond}}

// BenchmarkGap is the latency of a 64-byte fill that follows a quiet gap in
// which the device got no work and the host slept, as an application
// between two pieces of work would. ns/op is the median latency of that
// fill alone (measured around the call, not the gap), with the mean and
// percentiles beside it, and gap-ns the median gap the host really slept
// (a sleep cannot be as short as 3 µs; see sleepFor).
func BenchmarkGap(b *testing.B) {
	for _, gap := range gaps {
		b.Run("gap="+gap.name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			measureGap(b, g, gap.d)
		})
	}
}

// measureGap sleeps for gap before each 64-byte fill, times the fill, and
// reports the latencies, the gaps and the process's cores. It returns how
// many fills it timed.
func measureGap(b *testing.B, g *softgpu.GPU, gap time.Duration) int {
	p := mustAlloc(b, g, 64)
	var lat, slept latencies
	m := startMeter()
	for b.Loop() {
		slept = append(slept, sleepFor(gap))
		start := time.Now()
		if err := g.Fill(p, 64, 1); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	m.report(b)
	lat.report(b)
	b.ReportMetric(slept.percentile(0.5), "gap-ns")
	return len(lat)
}

// BenchmarkQuiet keeps an open device idle, quietSleep per iteration; the
// figure is its bill in cores (ns/op is suppressed: it is just the sleep).
func BenchmarkQuiet(b *testing.B) {
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	measureQuiet(b)
}

// measureQuiet sleeps quietSleep per iteration, while whatever device the
// caller opened sits idle, and reports the process's cores over that time.
func measureQuiet(b *testing.B) {
	m := startMeter()
	for b.Loop() {
		time.Sleep(quietSleep)
	}
	m.report(b)
	b.ReportMetric(0, "ns/op")
}

// quietSleep is how long Quiet sleeps per iteration. Waking from a sleep
// costs the benchmark itself CPU (about 45 µs on the measured machine): at
// 1 ms a sleep that alone would read 0.045 cores, as much as the bill being
// measured; at 10 ms it is under 0.005.
const quietSleep = 10 * time.Millisecond
