package softgpu_test

import (
	"path/filepath"
	"testing"

	softgpu "softgpu/stage4-nolock"
)

// BenchmarkTrace is RoundTrip/engine=copy (op=roundtrip) and
// FillStream/size=64B/depth=256 (op=fillstream) with tracing off
// (state=off, the default configuration) and on (state=on, every event
// recorded): what the trace costs when it is used, and — against RoundTrip
// and FillStream — that it costs nothing when it is not.
func BenchmarkTrace(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "state=off"
		if on {
			name = "state=on"
		}
		b.Run(name+"/op=roundtrip", func(b *testing.B) {
			cfg := softgpu.Config{}
			if on {
				cfg.Trace = filepath.Join(b.TempDir(), "trace.json")
			}
			g := openBench(b, cfg)
			defer g.Close()
			b.ReportAllocs()
			m := startMeter()
			for b.Loop() {
				if err := g.Nop(softgpu.Copy); err != nil {
					b.Fatal(err)
				}
			}
			m.report(b)
		})
		b.Run(name+"/op=fillstream", func(b *testing.B) {
			cfg := softgpu.Config{}
			if on {
				cfg.Trace = filepath.Join(b.TempDir(), "trace.json")
			}
			g := openBench(b, cfg)
			defer g.Close()
			measureFillStream(b, g, 256)
		})
	}
}
