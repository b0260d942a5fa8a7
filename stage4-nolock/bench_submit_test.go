package softgpu_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage4-nolock"
	"softgpu/stage4-nolock/abi"
	"softgpu/stage4-nolock/driver"
)

// BenchmarkSubmit has N goroutines each submitting 64-byte fills to its own
// buffer on the copy engine and waiting for each; ns/op is per fill across
// all of them, so perfect scaling would divide it by N.
func BenchmarkSubmit(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("submitters=%d", n), func(b *testing.B) {
			g := openBench(b, softgpu.Config{MemorySize: 1 << 20})
			defer g.Close()
			bufs := make([]softgpu.Ptr, n)
			for i := range bufs {
				bufs[i] = mustAlloc(b, g, 64)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			m := startMeter()
			b.ResetTimer()
			for i := range n {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := g.Fill(bufs[i], 64, byte(i)); err != nil {
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

// BenchmarkSubmitLatency is Submit seen by one command: N goroutines each
// submit 64-byte fills and wait for each, and every fill's time from the
// call to its return is kept. ns/op is the median of those latencies, with
// the tail beside it. With more submitters than cores, the tail is where a
// lock — or its absence — shows.
func BenchmarkSubmitLatency(b *testing.B) {
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("submitters=%d", n), func(b *testing.B) {
			g := openBench(b, softgpu.Config{MemorySize: 1 << 20})
			defer g.Close()
			var next atomic.Int64
			var wg sync.WaitGroup
			perSubmitter := make([]latencies, n)
			m := startMeter()
			b.ResetTimer()
			for i := range n {
				p := mustAlloc(b, g, 64)
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						start := time.Now()
						if err := g.Fill(p, 64, byte(i)); err != nil {
							b.Error(err)
							return
						}
						perSubmitter[i] = append(perSubmitter[i], time.Since(start))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			m.report(b)
			var all latencies
			for _, l := range perSubmitter {
				all = append(all, l...)
			}
			all.report(b)
		})
	}
}

// BenchmarkSubmitStall holds one submitter for stall between claiming its
// place and publishing its command (a driver hook: a goroutine descheduled
// at the worst moment), and meanwhile submits a 64-byte fill from another
// goroutine — on the same engine (other=same) or the other one
// (other=engine). ns/op is the median latency of that fill. It shows what
// one stalled submitter costs everyone else: behind the global lock of
// stages 0 to 3, all of them waited out the stall; without it, only a
// command behind the stalled one in its channel's order does (other=same).
func BenchmarkSubmitStall(b *testing.B) {
	const stall = time.Millisecond
	for _, other := range []struct {
		name   string
		engine softgpu.Engine
	}{{"same", softgpu.Copy}, {"engine", softgpu.Compute}} {
		b.Run("stall=1ms/other="+other.name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			p := mustAlloc(b, g, 64)
			var armed atomic.Bool
			stalled := make(chan struct{})
			release := make(chan struct{})
			g.SetHooks(driver.Hooks{Reserved: func(abi.Channel) {
				if armed.CompareAndSwap(true, false) {
					stalled <- struct{}{}
					<-release
				}
			}})
			var lat latencies
			m := startMeter()
			for b.Loop() {
				armed.Store(true)
				done := make(chan error, 1)
				go func() { done <- g.Nop(softgpu.Copy) }() // the submitter that stalls
				<-stalled
				time.AfterFunc(stall, func() { release <- struct{}{} })
				start := time.Now()
				if err := fill(g, other.engine, p); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			m.report(b)
			lat.report(b)
		})
	}
}

// fill runs a 64-byte fill at p on engine e.
func fill(g *softgpu.GPU, e softgpu.Engine, p softgpu.Ptr) error {
	if e == softgpu.Copy {
		return g.Fill(p, 64, 1)
	}
	return g.Add32(p, 64, 1) // the compute engine's one-line write
}
