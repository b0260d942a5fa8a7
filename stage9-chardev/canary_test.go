package softgpu_test

import (
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The canary. This machine's two vCPUs move between placements the
// hypervisor chooses, and a bare cache-line round trip between them reads
// about 55, 110 or 330 ns depending on where they sit — for seconds at a
// time. A benchmark row measured in one placement and compared with one
// measured in another compares the hypervisor, not the code. So, when
// SOFTGPU_CANARY=1 (tools/cmd/record sets it), every benchmark that opens a
// device measures a short ping-pong right before opening it and right after
// closing it, in the same process, and reports both:
//
//	canary-before-ns  canary-after-ns
//
// A row whose two canaries disagree was measured while the placement moved,
// and the record tool runs it again.

var canaryOn = os.Getenv("SOFTGPU_CANARY") == "1"

// withCanary brackets the benchmark that calls it (before it opens its
// device) with canaries, if SOFTGPU_CANARY=1. The second runs in a cleanup,
// after the benchmark function — and its deferred Close — has returned.
func withCanary(b *testing.B) {
	if !canaryOn {
		return
	}
	before := canaryNs()
	b.Cleanup(func() {
		b.ReportMetric(before, "canary-before-ns")
		b.ReportMetric(canaryNs(), "canary-after-ns")
	})
}

// canaryNs is the median, over five bursts of 2,000, of one cache-line
// round trip between two goroutines: a millisecond or two of the machine's
// own latency, with no device open.
func canaryNs() float64 {
	var ball paddedWord
	done := make(chan struct{})
	go func() {
		defer close(done)
		for polls := 1; ; polls++ {
			v := ball.v.Load()
			if v == ^uint64(0) {
				return
			}
			if v%2 == 1 {
				ball.v.Store(v + 1)
			}
			if polls%(1<<12) == 0 {
				runtime.Gosched()
			}
		}
	}()
	var bursts []float64
	var v uint64
	for range 5 {
		start := time.Now()
		for range 2000 {
			v += 2
			ball.v.Store(v - 1)
			for polls := 1; ball.v.Load() != v; polls++ {
				if polls%(1<<12) == 0 {
					runtime.Gosched()
				}
			}
		}
		bursts = append(bursts, float64(time.Since(start).Nanoseconds())/2000)
	}
	ball.v.Store(^uint64(0))
	<-done
	slices.Sort(bursts)
	return bursts[len(bursts)/2]
}

// paddedWord is a word on a cache line of its own.
type paddedWord struct {
	_ [64]byte
	v atomic.Uint64
	_ [56]byte
}
