package softgpu_test

import (
	"errors"
	"testing"
	"time"

	softgpu "softgpu/stage6-runlist"
)

var copySizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkH2D copies host memory the host has just written to device
// memory: an ordinary Go slice (mem=pageable: through the bounce buffers)
// or pinned memory from HostAlloc (mem=pinned: one COPY by the engine).
func BenchmarkH2D(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, toDevice) })
	}
	for _, sz := range copySizes {
		b.Run("mem=pinned/size="+sz.name, func(b *testing.B) { benchPinned(b, sz.n, toDevice, softgpu.Config{}) })
	}
}

// BenchmarkD2H copies device memory to host memory, which the host then
// reads: an ordinary Go slice, or pinned memory; see BenchmarkH2D.
func BenchmarkD2H(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, fromDevice) })
	}
	for _, sz := range copySizes {
		b.Run("mem=pinned/size="+sz.name, func(b *testing.B) { benchPinned(b, sz.n, fromDevice, softgpu.Config{}) })
	}
}

// benchPinned times copies between n bytes of device memory and pinned host
// memory, on a device opened with cfg. Without the right to pin n bytes (RLIMIT_MEMLOCK; 8 MiB by
// default for an unprivileged user) the row is skipped, with the error
// saying what to raise.
func benchPinned(b *testing.B, n int, dir direction, cfg softgpu.Config) {
	g := openBench(b, cfg)
	defer g.Close()
	p := mustAlloc(b, g, uint64(n))
	buf, err := g.HostAlloc(uint64(n))
	if errors.Is(err, softgpu.ErrPinLimit) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer g.HostFree(buf)
	writeDevice(b, g, p, n)
	host := buf.Bytes()
	before := g.Stats()
	measureCopies(b, host, dir, func() error {
		if dir == toDevice {
			return g.Write(p, host)
		}
		return g.Read(host, p)
	})
	reportWaits(b, g, before)
}

// reportWaits adds to a pinned copy row how its copies' waits ended, and
// now how they began: wakeups/op is the share of copies whose waiter
// stopped polling, blocked, and was woken by the interrupt; wakes/op the
// share whose doorbell found the copy engine asleep and woke it (idle.go:
// the engine sleeps once its ring has been empty for its budget, and the
// host's write of the next copy's bytes is such a gap). Either wake-up
// costs the copy microseconds, and rows that differ in ns/op can differ in
// which side slept; this tells them apart. It is read after measureCopies,
// when b.N is the number of copies timed (the fill before is not counted:
// Stats was read after it).
func reportWaits(b *testing.B, g *softgpu.GPU, before softgpu.Stats) {
	s := g.Stats()
	b.ReportMetric(float64(s.Wakeups-before.Wakeups)/float64(b.N), "wakeups/op")
	b.ReportMetric(float64(s.EngineWakes-before.EngineWakes)/float64(b.N), "wakes/op")
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
