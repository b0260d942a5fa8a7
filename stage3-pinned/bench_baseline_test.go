package softgpu_test

import (
	"testing"
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
}
