package softgpu_test

import (
	"errors"
	"testing"
	"time"

	softgpu "softgpu/stage8-managed"
)

// BenchmarkManaged copies managed memory that the host has just written to
// device memory, sequentially, in one COPY: every page starts on the host,
// so the copy faults its way through, and the fault handler moves the
// pages (and their prefetch window) as it goes. This is the reference's
// measurement (its rows: prefetch 16, prefetch off, and engines spinning).
// Each iteration first brings the pages back (Sync) and writes them, outside
// the timed copy, as measureCopies produces before an H2D; ns/op and MB/s
// are the copy alone, to set beside H2D/mem=pinned. us/page is the copy's
// time per 4 KiB page, faults/op and batches/op the handler's counts,
// dups/op the records that named a page another record of their batch
// named, and faults/batch the records per batch (reportFaults).
//
// The thrashing guard is off here: every iteration moves every page to the
// device and back, quickly, which is what it would catch — and then the
// rows would measure remote mapping, not migration.
func BenchmarkManaged(b *testing.B) {
	policies := []struct {
		name string
		p    softgpu.Prefetch
	}{{"0", softgpu.PrefetchOff}, {"16", softgpu.PrefetchWindow}, {"adaptive", softgpu.PrefetchAdaptive},
		{"density", softgpu.PrefetchDensity}}
	for _, pol := range policies {
		for _, sz := range []struct {
			name string
			n    int
		}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
			b.Run("prefetch="+pol.name+"/size="+sz.name, func(b *testing.B) {
				benchManaged(b, softgpu.Config{Prefetch: pol.p, ThrashThreshold: -1}, sz.n, false)
			})
		}
	}
	b.Run("idle=spin/prefetch=16/size=1MiB", func(b *testing.B) {
		benchManaged(b, softgpu.Config{Idle: softgpu.IdleSpin, ThrashThreshold: -1}, 1<<20, false)
	})
}

// BenchmarkManagedPrefetch is the same copy after an explicit Prefetch to
// the device, whose time is included: what cudaMemPrefetchAsync buys.
func BenchmarkManagedPrefetch(b *testing.B) {
	b.Run("size=1MiB", func(b *testing.B) { benchManaged(b, softgpu.Config{ThrashThreshold: -1}, 1<<20, true) })
}

// benchManaged times device copies of n bytes of freshly host-written
// managed memory into device memory.
func benchManaged(b *testing.B, cfg softgpu.Config, n int, prefetch bool) {
	g := openBench(b, cfg)
	defer g.Close()
	ctx, ch, m := managedSetup(b, g, n)
	dst, err := ctx.Alloc(uint64(n))
	if err != nil {
		b.Fatal(err)
	}
	start := g.ManagedStats()
	var copying time.Duration
	copies := 0
	mt := startMeter()
	for b.Loop() {
		if err := m.Sync(); err != nil {
			b.Fatal(err)
		}
		produce(m.Bytes(), byte(copies))
		t0 := time.Now()
		if prefetch {
			mg, err := m.Prefetch(0, uint64(n), softgpu.ToDevice)
			if err != nil {
				b.Fatal(err)
			}
			if err := mg.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		if err := ch.Copy(dst, m.Ptr(), uint64(n)); err != nil {
			b.Fatal(err)
		}
		copying += time.Since(t0)
		copies++
	}
	mt.report(b)
	s := g.ManagedStats()
	perCopy := float64(copying.Nanoseconds()) / float64(copies)
	b.ReportMetric(perCopy, "ns/op")
	b.ReportMetric(float64(n)/perCopy*1e3, "MB/s")
	b.ReportMetric(perCopy/1e3/float64(n>>12), "us/page")
	reportFaults(b, start, s, copies)
}

// reportFaults reports the fault handler's counts between start and end
// over ops operations: faults/op, batches/op, dups/op and faults/batch.
func reportFaults(b *testing.B, start, end softgpu.ManagedStats, ops int) {
	faults, batches := float64(end.Faults-start.Faults), float64(end.Batches-start.Batches)
	b.ReportMetric(faults/float64(ops), "faults/op")
	b.ReportMetric(batches/float64(ops), "batches/op")
	b.ReportMetric(float64(end.Duplicates-start.Duplicates)/float64(ops), "dups/op")
	if batches > 0 {
		b.ReportMetric(faults/batches, "faults/batch")
	}
}

// BenchmarkManagedHost times what the host pays to read back n bytes the
// device wrote into managed memory: the device FILLs it (untimed), then
// Sync and a read of every line (timed).
func BenchmarkManagedHost(b *testing.B) {
	b.Run("size=1MiB", func(b *testing.B) {
		const n = 1 << 20
		g := openBench(b, softgpu.Config{ThrashThreshold: -1})
		defer g.Close()
		_, ch, m := managedSetup(b, g, n)
		var reading time.Duration
		reads := 0
		for b.Loop() {
			if err := ch.Fill(m.Ptr(), n, byte(reads)); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := m.Sync(); err != nil {
				b.Fatal(err)
			}
			sink += consume(m.Bytes())
			reading += time.Since(t0)
			reads++
		}
		per := float64(reading.Nanoseconds()) / float64(reads)
		b.ReportMetric(per, "ns/op")
		b.ReportMetric(float64(n)/per*1e3, "MB/s")
	})
}

// BenchmarkOversubscribe fills, then sums, a managed allocation 1.5 times
// the size of device memory: every pass evicts pages to make room for the
// next ones. ns/op is one pass (FILL then SUM32), evicted/op the pages it
// pushed out. The policy= rows run a pattern with reuse under each
// eviction policy (benchOversubscribeReuse).
func BenchmarkOversubscribe(b *testing.B) {
	for _, pol := range []struct {
		name string
		e    softgpu.Eviction
	}{{"fifo", softgpu.EvictFIFO}, {"clock", softgpu.EvictClock}} {
		b.Run("policy="+pol.name+"/pattern=reuse/ratio=1.5", func(b *testing.B) { benchOversubscribeReuse(b, pol.e) })
	}
	b.Run("ratio=1.5", func(b *testing.B) {
		o := oversubscribed(b, softgpu.Config{ThrashThreshold: -1}, 4096)
		g, ctx, m, n, sum, out := o.g, o.ctx, o.m, o.n, o.sum, o.out
		fill, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{})
		if err != nil {
			b.Fatal(err)
		}
		start := g.ManagedStats()
		passes := 0
		for b.Loop() {
			if err := fill.Fill(m.Ptr(), n, 1); err != nil {
				b.Fatal(err)
			}
			if err := sum.Sum32(out, m.Ptr(), n); err != nil {
				b.Fatal(err)
			}
			passes++
		}
		b.ReportMetric(float64(g.ManagedStats().Evicted-start.Evicted)/float64(passes), "evicted/op")
	})
}

// managedSetup makes a context, a copy-engine channel in it and n bytes of
// managed memory.
func managedSetup(b *testing.B, g *softgpu.GPU, n int) (*softgpu.Context, *softgpu.Channel, *softgpu.Managed) {
	ctx, err := g.NewContext()
	if err != nil {
		b.Fatal(err)
	}
	ch, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := ctx.AllocManaged(uint64(n))
	if errors.Is(err, softgpu.ErrPinLimit) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	return ctx, ch, m
}

// oversubscription is what both kinds of Oversubscribe row start from.
type oversubscription struct {
	g   *softgpu.GPU
	ctx *softgpu.Context
	m   *softgpu.Managed // 1.5 times device memory
	n   uint64           // m's size
	sum *softgpu.Channel // on the compute engine
	out softgpu.Ptr      // 8 bytes of device memory for sums
}

// oversubscribed opens a GPU of 8 MiB of device memory with cfg's other
// settings, and makes a context in it, a managed allocation of 1.5 times
// the device memory rounded down to a multiple of align, a compute-engine
// channel and 8 bytes of device memory. The GPU is closed when b ends.
func oversubscribed(b *testing.B, cfg softgpu.Config, align uint64) oversubscription {
	b.Helper()
	cfg.MemorySize = 8 << 20
	o := oversubscription{g: openBench(b, cfg)}
	b.Cleanup(func() { o.g.Close() })
	var err error
	if o.ctx, err = o.g.NewContext(); err != nil {
		b.Fatal(err)
	}
	o.n = uint64(float64(o.g.MemorySize())*1.5) &^ (align - 1)
	o.m, err = o.ctx.AllocManaged(o.n)
	if errors.Is(err, softgpu.ErrPinLimit) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	if o.sum, err = o.ctx.NewChannel(softgpu.Compute, softgpu.ChannelOptions{}); err != nil {
		b.Fatal(err)
	}
	if o.out, err = o.ctx.Alloc(8); err != nil {
		b.Fatal(err)
	}
	return o
}
