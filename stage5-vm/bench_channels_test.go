package softgpu_test

import (
	"sync/atomic"
	"testing"

	softgpu "softgpu/stage5-vm"
)

// BenchmarkChannels is small-command throughput with the work spread over
// n channels of the copy engine, each submitting batches of eight 64-byte
// fills and waiting for each; ns/op is per fill, across all channels. This
// stage has one channel per engine, so only n=1; stage 6, where many
// channels share an engine, adds n=2, 8 and 64, and its n=1 — the engine's
// default channel alone on its runlist — is this row, which shows what the
// scheduler costs when there is nothing to schedule.
func BenchmarkChannels(b *testing.B) {
	b.Run("n=1", func(b *testing.B) {
		g := openBench(b, softgpu.Config{MemorySize: 16 << 20})
		defer g.Close()
		dst := mustAlloc(b, g, 64)
		batch := g.NewBatch(softgpu.Copy)
		var next atomic.Int64
		total := int64(b.N)
		const per = 8
		m := startMeter()
		b.ResetTimer()
		for next.Add(per) <= total+per-1 {
			for range per {
				batch.Fill(dst, 64, 1)
			}
			p, err := batch.Submit()
			if err == nil {
				err = p.Wait()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		m.report(b)
	})
}
