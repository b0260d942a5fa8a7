package softgpu_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage6-runlist"
)

// The benchmarks of the runlist: what a small, urgent command waits behind
// a bulk stream on the same engine, what the stream loses to the switching,
// and what scheduling costs as channels grow.

// BenchmarkRunlist runs a bulk stream and a probe on the copy engine, each
// on a channel of its own: the bulk channel keeps two 8 MiB copies in
// flight; the probe sleeps 50 µs, then submits a 64-byte fill and waits
// for it. Both channels have the timeslice the name gives (none: a channel
// keeps the engine until its ring is empty); prio=equal gives both normal
// priority, prio=high gives the probe high priority. ns/op is the probe's
// median latency (p50-ns and p99-ns beside it); B/s is the bulk copies'
// throughput over the run, as the pair shares the engine; preempts/op
// counts the commands preempted per probe.
func BenchmarkRunlist(b *testing.B) {
	for _, tc := range []struct {
		name  string
		slice time.Duration
		prio  softgpu.Priority
	}{
		{"slice=none/prio=equal", 0, softgpu.PriorityNormal},
		{"slice=50us/prio=equal", 50 * time.Microsecond, softgpu.PriorityNormal},
		{"slice=5us/prio=equal", 5 * time.Microsecond, softgpu.PriorityNormal},
		{"slice=none/prio=high", 0, softgpu.PriorityHigh},
	} {
		b.Run(tc.name, func(b *testing.B) { benchRunlist(b, tc.slice, tc.prio, 0) })
	}
}

// BenchmarkRunlistContext is Runlist's equal-priority pair swept over the
// slice and over the engine context a preemption saves and a resume
// restores (Config.ContextSize; 256 KiB is the default): the trade between
// the probe's latency, which falls with the slice, and the stream's
// throughput, which falls as switches, and the bytes each one moves, rise.
func BenchmarkRunlistContext(b *testing.B) {
	for _, ctx := range []struct {
		name string
		size uint64
	}{{"4KiB", 4 << 10}, {"256KiB", 256 << 10}, {"4MiB", 4 << 20}} {
		for _, sl := range []struct {
			name  string
			slice time.Duration
		}{{"none", 0}, {"500us", 500 * time.Microsecond}, {"50us", 50 * time.Microsecond}, {"5us", 5 * time.Microsecond}} {
			b.Run("ctx="+ctx.name+"/slice="+sl.name, func(b *testing.B) {
				benchRunlist(b, sl.slice, softgpu.PriorityNormal, ctx.size)
			})
		}
	}
}

// benchRunlist is the pair of Runlist and RunlistContext; ctx is the
// engine context size, 0 for the default.
func benchRunlist(b *testing.B, slice time.Duration, probePrio softgpu.Priority, ctx uint64) {
	g := openBench(b, softgpu.Config{MemorySize: 64 << 20, ContextSize: ctx})
	defer g.Close()
	bulk, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityNormal, Timeslice: slice})
	if err != nil {
		b.Fatal(err)
	}
	probe, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: probePrio, Timeslice: slice})
	if err != nil {
		b.Fatal(err)
	}
	const chunk = 8 << 20
	src, dst := mustAllocB(b, g, chunk), mustAllocB(b, g, chunk)
	flag := mustAllocB(b, g, 64)

	var stop atomic.Bool
	var moved atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		var inflight []*softgpu.Pending
		for !stop.Load() {
			p, err := bulk.CopyAsync(dst, src, chunk)
			if err != nil {
				b.Error(err)
				return
			}
			inflight = append(inflight, p)
			if len(inflight) == 2 {
				if err := inflight[0].Wait(); err != nil {
					b.Error(err)
					return
				}
				moved.Add(chunk)
				inflight = inflight[1:]
			}
		}
		for _, p := range inflight {
			p.Wait()
		}
	})
	time.Sleep(2 * time.Millisecond) // the stream is running
	before := g.SchedStats()
	start, base := time.Now(), moved.Load()
	var lat latencies
	m := startMeter()
	for b.Loop() {
		sleepFor(50 * time.Microsecond)
		t0 := time.Now()
		if err := probe.Fill(flag, 64, 1); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	m.report(b)
	preempts := g.SchedStats().Preempts - before.Preempts
	// The stream's rate needs a window that holds whole copies: under a
	// short slice with a large context a switch can cost more than the
	// probe's period, and a short -benchtime may end before one 8 MiB copy
	// has. So the pair goes on as it was, the probe's waits no longer
	// counted, until the stream has completed two copies since start.
	for moved.Load()-base < 2*chunk && !b.Failed() {
		sleepFor(50 * time.Microsecond)
		if err := probe.Fill(flag, 64, 1); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, bytes := time.Since(start), moved.Load()-base
	stop.Store(true)
	wg.Wait()
	lat.report(b)
	b.ReportMetric(float64(bytes)/elapsed.Seconds(), "B/s")
	b.ReportMetric(float64(preempts)/float64(len(lat)), "preempts/op")
}

// mustAllocB allocates device memory or ends the benchmark.
func mustAllocB(b *testing.B, g *softgpu.GPU, n uint64) softgpu.Ptr {
	b.Helper()
	p, err := g.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkChannels is small-command throughput with the work spread over
// n channels of the copy engine: n goroutines (GOMAXPROCS shares them
// out), each submitting batches of eight 64-byte fills on a channel of its
// own and waiting for each batch. n=1 is the engine's default channel
// alone on its runlist: the bypass, with no scheduling at all. ns/op is per
// fill, across all channels.
func BenchmarkChannels(b *testing.B) {
	for _, n := range []int{1, 2, 8, 64} {
		b.Run("n="+itoa(n), func(b *testing.B) {
			// 64 MiB, the default: 64 channels' engine-context save areas
			// (256 KiB each) take 16 MiB of it.
			g := openBench(b, softgpu.Config{MemorySize: 64 << 20})
			defer g.Close()
			type lane struct {
				batch *softgpu.Batch
				dst   softgpu.Ptr
			}
			lanes := make([]lane, n)
			for i := range lanes {
				lanes[i].dst = mustAllocB(b, g, 64)
				if i == 0 {
					lanes[i].batch = g.NewBatch(softgpu.Copy) // the default channel
					continue
				}
				ch, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityNormal})
				if err != nil {
					b.Fatal(err)
				}
				lanes[i].batch = ch.NewBatch()
			}
			var next atomic.Int64
			total := int64(b.N)
			const per = 8
			m := startMeter()
			b.ResetTimer()
			var wg sync.WaitGroup
			for i := range lanes {
				l := &lanes[i]
				wg.Go(func() {
					for next.Add(per) <= total+per-1 {
						for range per {
							l.batch.Fill(l.dst, 64, 1)
						}
						p, err := l.batch.Submit()
						if err == nil {
							err = p.Wait()
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			m.report(b)
		})
	}
}

// itoa formats a small number for a benchmark name.
func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
