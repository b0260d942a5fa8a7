package softgpu_test

import (
	"fmt"
	"testing"

	softgpu "softgpu/stage2-fence"
)

// BenchmarkFillStream keeps depth 64-byte fills in flight on the copy
// engine; ns/op is per fill, so it is the stream's throughput. The window is
// two batches of depth/2 fills (one fill, for depth=1): whenever the older
// batch completes, the room it frees is refilled with one new batch — one
// doorbell — while the engine works through the younger one, so the host
// writes half the window as the engine runs the other half. doorbells/op
// shows the batching; depth=1 is Fill/size=64B through the asynchronous
// calls.
func BenchmarkFillStream(b *testing.B) {
	for _, depth := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("size=64B/depth=%d", depth), func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			measureFillStream(b, g, depth)
		})
	}
}

// measureFillStream streams fills at the given depth (see FillStream) and
// reports cores and doorbells/op.
func measureFillStream(b *testing.B, g *softgpu.GPU, depth int) {
	buf := mustAlloc(b, g, 64*uint64(depth))
	perBatch := max(depth/2, 1)
	batch := g.NewBatch(softgpu.Copy)
	var inFlight []*softgpu.Pending // oldest first, perBatch fills each
	bells := g.Doorbells()
	m := startMeter()
	b.ResetTimer()
	for submitted := 0; submitted < b.N || len(inFlight) > 0; {
		for len(inFlight)*perBatch < depth && submitted < b.N {
			for ; batch.Len() < perBatch && submitted < b.N; submitted++ {
				batch.Fill(buf+softgpu.Ptr(64*(submitted%depth)), 64, byte(submitted))
			}
			p, err := batch.Submit()
			if err != nil {
				b.Fatal(err)
			}
			inFlight = append(inFlight, p)
		}
		if err := inFlight[0].Wait(); err != nil {
			b.Fatal(err)
		}
		inFlight = inFlight[1:]
	}
	b.StopTimer()
	m.report(b)
	b.ReportMetric(float64(g.Doorbells()-bells)/float64(b.N), "doorbells/op")
}
