package softgpu_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBaseline measures the machine itself, in the same run as the
// stage's figures, so each can be read as a fraction of what is possible.
// No device is open while these run.
func BenchmarkBaseline(b *testing.B) {
	// pingpong: two goroutines bounce one cache line, pure spin — the
	// floor under any round trip between a host and an engine thread.
	b.Run("pingpong", func(b *testing.B) {
		pp := startPingPong()
		m := startMeter()
		for b.Loop() {
			pp.serve()
		}
		m.report(b)
		pp.stop()
	})
	// handoff, inline and packed: a round trip's lines and nothing else,
	// as three rings would hand them across — three lines per command
	// (handoff: the floor under RoundTrip, which pingpong is not), two,
	// and one (bare_rings_test.go).
	for _, r := range bareRings {
		b.Run(r.name, func(b *testing.B) {
			ring := r.start()
			m := startMeter()
			for b.Loop() {
				ring.roundTrip()
			}
			m.report(b)
			ring.stop()
		})
	}
	// memmove: a plain copy between two Go slices, the ceiling for any
	// copy the CPU does on the device's behalf — measured as the copy
	// benchmarks are, on data the host has just written.
	for _, sz := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run("memmove/size="+sz.name, func(b *testing.B) {
			src, dst := touched(sz.n), touched(sz.n)
			measureCopies(b, src, toDevice, func() error {
				copy(dst, src)
				return nil
			})
		})
	}
	// wake/gap=... and quiet: a bare futex wake after a quiet gap, and the
	// bill of Quiet's own loop.
	benchWakeBaseline(b)
	// op=futexwake/path=process: the same wake, shared, to a thread of
	// another process — the floor under Boundary/op=wake3ms/path=node.
	b.Run("op=futexwake/path=process", benchFutexWakeProcess)
	// op=futexpingpong/path=process: a wake there and a wake back, the
	// floor under a wake3ms whose client slept on its fence.
	b.Run("op=futexpingpong/path=process", benchFutexPingPongProcess)
	// op=uffdfault/path=process: a missing fault answered by another
	// process with one page — the floor under ManagedPager's sparse touch.
	b.Run("op=uffdfault/path=process", benchUffdFaultProcess)
	b.Run("quiet", measureQuiet) // with no device open
}

// benchWakeBaseline runs Baseline/wake/gap=30us|300us|3ms: a goroutine
// locked to its thread sleeps in FUTEX_WAIT; the benchmark sleeps through
// the gap as Gap does (sleepFor), stamps the clock, stores 1 into the futex
// word and calls FUTEX_WAKE. ns/op is the median time from that stamp to
// the sleeper running again (its own clock read after the call returns),
// with the mean and percentiles: the floor for waking a sleeping engine
// after the same gap, measured in the same run as IdleGap.
func benchWakeBaseline(b *testing.B) {
	for _, gap := range gaps[2:] { // 30us, 300us, 3ms: gaps a hybrid engine may sleep through
		b.Run("wake/gap="+gap.name, func(b *testing.B) {
			var word paddedFutex // 0: sleep; 1: wake up; 2: exit
			var stampNs, wokeNs atomic.Int64
			var rounds atomic.Uint64
			base := time.Now()
			done := make(chan struct{})
			go func() { // the sleeper
				defer close(done)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				for {
					for word.v.Load() == 0 {
						futexSleep(&word.v, 0)
					}
					wokeNs.Store(int64(time.Since(base)))
					if word.v.Load() == 2 {
						return
					}
					word.v.Store(0)
					rounds.Add(1) // pairs with the waker's wait below
				}
			}()
			var lat latencies
			m := startMeter()
			for b.Loop() {
				sleepFor(gap.d)
				n := rounds.Load()
				stampNs.Store(int64(time.Since(base)))
				word.v.Store(1)
				futexWakeOne(&word.v)
				// Wait as the host waits for a fill: spinning, yielding.
				for polls := 1; rounds.Load() == n; polls++ {
					if polls%64 == 0 {
						runtime.Gosched()
					}
				}
				lat = append(lat, time.Duration(wokeNs.Load()-stampNs.Load()))
			}
			m.report(b)
			lat.report(b)
			word.v.Store(2)
			futexWakeOne(&word.v)
			<-done
		})
	}
}

// paddedFutex is a futex word on a cache line of its own.
type paddedFutex struct {
	_ [64]byte
	v atomic.Uint32
	_ [60]byte
}
