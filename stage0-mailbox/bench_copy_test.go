package softgpu_test

import (
	"testing"
	"time"

	softgpu "softgpu/stage0-mailbox"
)

var copySizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// BenchmarkH2D copies an ordinary Go slice the host has just written to
// device memory.
func BenchmarkH2D(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, toDevice) })
	}
}

// BenchmarkD2H copies device memory to an ordinary Go slice, which the host
// then reads.
func BenchmarkD2H(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, fromDevice) })
	}
}

// direction is which way a copy goes.
type direction bool

const (
	toDevice   direction = true  // H2D: the host produces the data first
	fromDevice direction = false // D2H: the host consumes the data after
)

// benchPageable times copies between n bytes of device memory and an
// ordinary Go slice.
func benchPageable(b *testing.B, n int, dir direction) {
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	p := mustAlloc(b, g, uint64(n))
	writeDevice(b, g, p, n)
	host := touched(n)
	measureCopies(b, host, dir, func() error {
		if dir == toDevice {
			return g.Write(p, host)
		}
		return g.Read(host, p)
	})
}

// writeDevice fills n bytes of device memory at p once, so that a copy
// from it reads memory that has been written — not the kernel's shared
// zero page that untouched memory maps to, which reads at the speed of a
// cache hit.
func writeDevice(b *testing.B, g *softgpu.GPU, p softgpu.Ptr, n int) {
	if err := g.Fill(p, uint64(n), 0x5a); err != nil {
		b.Fatal(err)
	}
}

// measureCopies times copies of host's bytes, one per iteration, as an
// application sees them: before each copy to the device the host writes
// every byte of host (produce), and after each copy from the device it
// reads every line of it (consume), so the copy moves data the host has
// just touched, not lines left warm in the copier's cache by the last
// iteration. Producing and consuming are outside the timed copy but not
// behind StopTimer, which stops the world. ns/op is the mean time of the
// copies alone, and MB/s their bandwidth.
func measureCopies(b *testing.B, host []byte, dir direction, copyFn func() error) {
	var copying time.Duration
	copies := 0
	m := startMeter()
	for b.Loop() {
		if dir == toDevice {
			produce(host, byte(copies))
		}
		start := time.Now()
		if err := copyFn(); err != nil {
			b.Fatal(err)
		}
		copying += time.Since(start)
		if dir == fromDevice {
			sink += consume(host)
		}
		copies++
	}
	m.report(b)
	perCopy := float64(copying.Nanoseconds()) / float64(copies)
	b.ReportMetric(perCopy, "ns/op")
	b.ReportMetric(float64(len(host))/perCopy*1e3, "MB/s") // bytes per ns is GB/s
}
