package softgpu_test

import (
	"testing"
	"time"

	softgpu "softgpu/stage6-runlist"
)

// BenchmarkFenceSignal is the time from the device writing a fence to the
// waiter running again, for each interrupt delivery path, with targeted
// wake-ups. The waiter blocks (WaitBlock) on a 30 µs DELAY, so it is asleep
// when the fence is written: ns/op is the median of that latency, read from
// the device clock (the engine stamps each fence with it).
func BenchmarkFenceSignal(b *testing.B) {
	for _, del := range []softgpu.Delivery{softgpu.IRQDirect, softgpu.IRQThreaded, softgpu.IRQWorkqueue} {
		b.Run("irq="+del.String(), func(b *testing.B) {
			g := openBench(b, softgpu.Config{Wait: softgpu.WaitBlock, Delivery: del})
			defer g.Close()
			benchFenceWake(b, g, 1)
		})
	}
}

// BenchmarkFenceWake is the same measurement on the direct path with eight
// fences in flight ahead of the one waited for, targeted and untargeted:
// untargeted, each of the eight interrupts and wakes the waiter for nothing.
// irqs/op and wakeups/op are per waited fence.
func BenchmarkFenceWake(b *testing.B) {
	for _, wake := range []softgpu.Wake{softgpu.WakeTargeted, softgpu.WakeEvery} {
		b.Run("wake="+wake.String(), func(b *testing.B) {
			g := openBench(b, softgpu.Config{Wait: softgpu.WaitBlock, Wake: wake})
			defer g.Close()
			benchFenceWake(b, g, 8)
		})
	}
}

// benchFenceWake submits 30 µs of DELAY as fences separate batches (one
// fence each) and blocks on the last; it reports the signal-to-running
// latency and the interrupts and wake-ups per waited fence.
func benchFenceWake(b *testing.B, g *softgpu.GPU, fences int) {
	batch := g.NewBatch(softgpu.Compute)
	var lat latencies
	before := g.Stats()
	m := startMeter()
	for b.Loop() {
		var p *softgpu.Pending
		for range fences {
			batch.Delay(30_000 / uint64(fences))
			var err error
			if p, err = batch.Submit(); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Duration(g.Now()-p.Fence().SignaledAt()))
	}
	m.report(b)
	lat.report(b)
	s := g.Stats()
	b.ReportMetric(float64(s.IRQs-before.IRQs)/float64(len(lat)), "irqs/op")
	b.ReportMetric(float64(s.Wakeups-before.Wakeups)/float64(len(lat)), "wakeups/op")
}
