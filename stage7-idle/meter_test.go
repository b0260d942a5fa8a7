package softgpu_test

import (
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the measuring helpers the benchmarks share: the bill in
// cores, latencies measured around one operation, and a sleep that an
// application would make.

// meter measures the bill of a benchmark: process CPU time per wall-clock
// second while it ran, reported as "cores". Two engines spinning flat out
// show as 2.0 whatever the host does.
type meter struct {
	wall time.Time
	cpu  time.Duration
}

func startMeter() meter { return meter{wall: time.Now(), cpu: cpuTime()} }

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
	b.ReportMetric(l.percentile(0.50), "ns/op")
	b.ReportMetric(l.mean(), "mean-ns")
	b.ReportMetric(l.percentile(0.50), "p50-ns")
	b.ReportMetric(l.percentile(0.95), "p95-ns")
	b.ReportMetric(l.percentile(0.99), "p99-ns")
}

// percentile returns the p-th percentile (0 to 1) of l, an observed value.
func (l latencies) percentile(p float64) float64 {
	s := slices.Clone(l)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))])
}

func (l latencies) mean() float64 {
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return float64(sum) / float64(len(l))
}

// sleepFor spends d asleep, the way an application waits for its next piece
// of work: the host thread blocks in the kernel, its core goes idle, and it
// has to be woken when the time is up — so the command after a gap finds
// the host as cold as the device. It returns how long the sleep really
// took.
//
// time.Sleep cannot make a short gap here: the runtime's timers wake at a
// granularity near a millisecond when nothing else is running (measured:
// 30 µs asleep took 1.08 ms). So the goroutine locks its thread and sleeps
// in nanosleep with the thread's timer slack at 1 ns (the default 50 µs
// slack would stretch every gap by that much). The shortest sleep the
// kernel gives is still ~15 µs on this machine, so gap=3us sleeps longer
// than its name; the benchmarks report the gap they really had (gap-ns).
//
// The slack is the thread's, and the thread keeps it once unlocked: it runs
// other goroutines, and every thread the runtime creates from it, and every
// process a benchmark starts from it, inherits it. So the old slack is put
// back before the thread is let go. Left at 1 ns, it changed what later
// benchmarks of the same process measured: in stage 9, ManagedPager's Sync
// of 1 MiB took about three times as long when a benchmark that slept this
// way had run before it in the process, and the same binary with the slack
// never set took the shorter time either way (TestSleepForLeavesTheTimerSlack).
func sleepFor(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0) // before the unlock: defers run last first
	}
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	start := time.Now()
	ts := unix.NsecToTimespec(int64(d))
	for {
		var left unix.Timespec
		if err := unix.Nanosleep(&ts, &left); err != unix.EINTR {
			break
		}
		ts = left // a signal cut the sleep short (the runtime's preemption): sleep the rest
	}
	return time.Since(start)
}
