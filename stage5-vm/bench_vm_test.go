package softgpu_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	softgpu "softgpu/stage5-vm"
)

// The benchmarks of virtual memory. Every earlier benchmark runs in the
// default context, through its page tables, so benchstat against the stage
// before shows what translation cost them; the families here measure it by
// page size, in a context of their own.

var vmPages = []struct {
	name string
	size softgpu.PageSize
}{{"4KiB", softgpu.Page4K}, {"64KiB", softgpu.Page64K}, {"2MiB", softgpu.Page2M}}

var vmSizes = []struct {
	name string
	n    int
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkVMH2D copies pinned host memory the host has just written to
// device memory, both mapped in a context with pages of the given size: a
// COPY by the engine, every page translated. Compare with
// H2D/mem=pinned/size=... of the same run.
func BenchmarkVMH2D(b *testing.B) {
	for _, page := range vmPages {
		for _, sz := range vmSizes {
			b.Run("page="+page.name+"/size="+sz.name, func(b *testing.B) { benchVM(b, softgpu.WalkerFragment, page.size, sz.n, toDevice) })
		}
	}
}

// BenchmarkVMH2DWalker is VMH2D through 4 KiB pages with each of the
// MMU's walkers (device/walker.go): fragment, the default, which VMH2D's
// page=4KiB rows measure too; scan, which reads the following leaf entries
// on every TLB fill; and none, one TLB entry per page — the honest
// baseline of a walker that learns nothing about contiguity. (VMH2D's rows
// are leaves and cannot become parents, so the walker is a family of its
// own.)
func BenchmarkVMH2DWalker(b *testing.B) {
	for _, w := range []softgpu.Walker{softgpu.WalkerScan, softgpu.WalkerFragment, softgpu.WalkerNone} {
		for _, sz := range vmSizes {
			b.Run("walker="+w.String()+"/page=4KiB/size="+sz.name, func(b *testing.B) { benchVM(b, w, softgpu.Page4K, sz.n, toDevice) })
		}
	}
}

// BenchmarkVMD2H is VMH2D the other way: device memory to pinned host
// memory the host then reads.
func BenchmarkVMD2H(b *testing.B) {
	for _, page := range vmPages {
		for _, sz := range vmSizes {
			b.Run("page="+page.name+"/size="+sz.name, func(b *testing.B) { benchVM(b, softgpu.WalkerFragment, page.size, sz.n, fromDevice) })
		}
	}
}

// benchVM times copies of n bytes between a device buffer and a pinned host
// buffer, both mapped in a fresh context with pages of size page (the
// buffers are rounded up to a page, so a 2 MiB page can map a 64 KiB
// buffer), on a device whose MMU uses walker w.
func benchVM(b *testing.B, w softgpu.Walker, page softgpu.PageSize, n int, dir direction) {
	g := openBench(b, softgpu.Config{MemorySize: 128 << 20, Walker: w})
	defer g.Close()
	ctx, err := g.NewContext()
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	alloc := (uint64(n) + uint64(page) - 1) &^ (uint64(page) - 1)
	dev, err := ctx.AllocPages(alloc, page)
	if err != nil {
		b.Fatal(err)
	}
	buf, err := g.HostAlloc(alloc)
	if errors.Is(err, softgpu.ErrPinLimit) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer g.HostFree(buf)
	host, err := ctx.Map(buf, page)
	if err != nil {
		b.Fatal(err)
	}
	if err := ctx.Fill(dev, uint64(n), 0x5a); err != nil { // written device memory, not the zero page
		b.Fatal(err)
	}
	tlb := g.TLBStats()
	measureCopies(b, buf.Bytes()[:n], dir, func() error {
		if dir == toDevice {
			return ctx.Copy(dev, host, uint64(n))
		}
		return ctx.Copy(host, dev, uint64(n))
	})
	s := g.TLBStats()
	b.ReportMetric(float64(s.Misses-tlb.Misses)/float64(b.N), "walks/op")
}

// BenchmarkTLB is the cost of translation when it misses: 64-byte fills at
// page-sized strides through a 16 MiB buffer mapped with 4 KiB pages —
// 4096 pages, far more than a TLB's 32 entries — one after another
// (pattern=seq) or at random pages (pattern=random). ns/op is per fill;
// walks/op counts the page walks. The device's MMU uses WalkerNone: the
// buffer's pages are contiguous, and the default fragment walker would
// cover them with eight 2 MiB entries and never miss.
func BenchmarkTLB(b *testing.B) {
	for _, pattern := range []string{"seq", "random"} {
		b.Run("pattern="+pattern+"/page=4KiB", func(b *testing.B) {
			g := openBench(b, softgpu.Config{MemorySize: 64 << 20, Walker: softgpu.WalkerNone})
			defer g.Close()
			ctx, err := g.NewContext()
			if err != nil {
				b.Fatal(err)
			}
			defer ctx.Close()
			const size, pages = 16 << 20, 16 << 20 >> 12
			buf, err := ctx.AllocPages(size, softgpu.Page4K)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			batch := ctx.NewBatch(softgpu.Copy)
			tlb := g.TLBStats()
			m := startMeter()
			i := 0
			for b.Loop() {
				p := i % pages
				if pattern == "random" {
					p = rng.IntN(pages)
				}
				batch.Fill(buf+softgpu.Ptr(p<<12), 64, 1)
				i++
				if batch.Len() == 64 {
					p, err := batch.Submit()
					if err == nil {
						err = p.Wait()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			if batch.Len() > 0 {
				p, _ := batch.Submit()
				p.Wait()
			}
			m.report(b)
			s := g.TLBStats()
			b.ReportMetric(float64(s.Misses-tlb.Misses)/float64(i), "walks/op")
		})
	}
}

// BenchmarkUnmap is the latency of unmapping 64 KiB from a context,
// invalidation handshake included, with the engines busy (each running a
// stream of DELAYs, from before the first timed Unmap), idle (spinning), or
// asleep (which need not be woken). ns/op is the median Unmap; each
// iteration maps the range again first, untimed.
func BenchmarkUnmap(b *testing.B) {
	for _, state := range []string{"busy", "idle", "asleep"} {
		b.Run("engine="+state, func(b *testing.B) {
			cfg := softgpu.Config{Idle: softgpu.IdleSpin}
			if state == "asleep" {
				cfg.Idle = softgpu.IdleSleep
			}
			g := openBench(b, cfg)
			defer g.Close()
			ctx, err := g.NewContext()
			if err != nil {
				b.Fatal(err)
			}
			defer ctx.Close()
			var stop chan struct{}
			if state == "busy" {
				stop = make(chan struct{})
				fed := make(chan struct{}, len(engines))
				for _, e := range engines {
					go func() {
						for first := true; ; first = false {
							select {
							case <-stop:
								return
							default:
							}
							g.Delay(e, 20_000)
							if first {
								fed <- struct{}{}
							}
						}
					}()
				}
				// Nothing is timed until each engine has run a DELAY
				// of its stream: a feeder just started has not fed
				// anything yet, and a short run (the stage5-unmap
				// trace's five iterations) would unmap beside two
				// idle engines and call them busy.
				for range engines {
					<-fed
				}
			}
			var lat latencies
			m := startMeter()
			for b.Loop() {
				p, err := ctx.AllocPages(64<<10, softgpu.Page4K)
				if err != nil {
					b.Fatal(err)
				}
				if state == "asleep" {
					time.Sleep(200 * time.Microsecond) // let the engines fall asleep
				}
				start := time.Now()
				if err := ctx.Free(p); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			m.report(b)
			lat.report(b)
			if stop != nil {
				close(stop)
			}
		})
	}
}
