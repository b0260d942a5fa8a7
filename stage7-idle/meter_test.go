package softgpu_test

import (
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// This file holds the measuring helpers of the benchmarks in bench_test.go.

// meter measures the bill of a benchmark: process CPU time per wall-clock
// second while it ran, reported as "cores". Two engines spinning flat out
// show as 2.0 whatever the host does.
type meter struct {
	wall time.Time
	cpu  time.Duration

	switches int64 // context switches of the process so far (stage 4)
}

func startMeter() meter { return meter{wall: time.Now(), cpu: cpuTime(), switches: contextSwitches()} }

// minMeterWindow is the shortest run whose cores figure means anything. The
// kernel charges CPU time to a thread running on another core only at that
// core's timer tick (every 4 ms here), so over a short window the figure can
// read 0 or 15 cores on a 2-core machine. Over 100 ms the error is a few
// percent.
const minMeterWindow = 100 * time.Millisecond

func (m meter) report(b *testing.B) {
	wall := time.Since(m.wall)
	if wall < minMeterWindow {
		return // e.g. -benchtime 1x: too short to bill, so no figure rather than a wrong one
	}
	b.ReportMetric(float64(cpuTime()-m.cpu)/float64(wall), "cores")
}

// reportSwitches adds "ctxsw/op": the process's context switches, voluntary
// (a thread blocked: a futex sleep, a parked M) and involuntary (the kernel
// preempted it), per operation while the benchmark ran — seed 003's measure
// of what a submission costs the scheduler. Like cores, it is left out of
// runs too short to mean anything.
func (m meter) reportSwitches(b *testing.B) {
	if time.Since(m.wall) < minMeterWindow {
		return
	}
	b.ReportMetric(float64(contextSwitches()-m.switches)/float64(b.N), "ctxsw/op")
}

// contextSwitches is the voluntary plus involuntary context switches of
// every thread of the process so far.
func contextSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// cpuTime is the user plus system CPU time of the whole process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// latencies collects per-operation latencies measured by the benchmark
// itself, for operations that are not the whole of an iteration.
type latencies []time.Duration

// report sets ns/op to the median latency — overriding the timer, which also
// counted the work around the measured operation — and adds the mean and
// the tail. The median, not the mean, is ns/op because these distributions
// have long tails (a descheduled host, a slow wake): a single 7 ms outlier
// would move a mean by more than the effect being compared across stages.
func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	pct := func(p float64) float64 { return float64(s[int(p*float64(len(s)-1))]) }
	b.ReportMetric(pct(0.50), "ns/op")
	b.ReportMetric(float64(sum)/float64(len(s)), "mean-ns")
	b.ReportMetric(pct(0.50), "p50-ns")
	b.ReportMetric(pct(0.95), "p95-ns")
	b.ReportMetric(pct(0.99), "p99-ns")
}

// idleFor lets d pass without touching the device. time.Sleep cannot make a
// short gap: below a millisecond the runtime's timer wait rounds up, so the
// last millisecond (and every gap shorter than that) is spent polling the
// clock, yielding the P so the engines keep running. The host's polling
// shows in the benchmark's cores; the device sees no work either way.
func idleFor(d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := time.Now().Add(d)
	if d > 2*time.Millisecond {
		time.Sleep(d - time.Millisecond)
	}
	for time.Now().Before(deadline) {
		runtime.Gosched()
	}
}
