package softgpu_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
)

// Benchmarks of managed memory under access patterns: what each prefetch
// policy moves for a pattern, what each eviction policy keeps when a hot
// set is re-used between cold sweeps, and what the thrashing guard saves
// a page that bounces between the host and the device.

// patternPages is ManagedPattern's allocation: 4 MiB, two 2 MiB blocks.
const patternPages = 1024

// patternTouch returns the pages a pattern touches, in the order it
// touches them: seq, every page in order; stride, every 8th page; random,
// as many pages as stride, distinct, in an order fixed by a seed.
func patternTouch(pattern string) []int {
	var pages []int
	switch pattern {
	case "seq":
		for p := range patternPages {
			pages = append(pages, p)
		}
	case "stride":
		for p := 0; p < patternPages; p += 8 {
			pages = append(pages, p)
		}
	case "random":
		pages = rand.New(rand.NewPCG(7, 33)).Perm(patternPages)[:patternPages/8]
	}
	return pages
}

// BenchmarkManagedPattern reads managed memory that starts on the host
// with a pattern of SUM32s, one 4 KiB page each (seq: one SUM32 over the
// whole 4 MiB), submitted as one batch, under each prefetch policy. ns/op
// is the batch, after a Sync that brings every page back (untimed);
// migrated-B/op the bytes moved to the device, untouched-B/op those of
// them no command read — what the prefetcher guessed wrong — and the
// fault counts as BenchmarkManaged reports them.
func BenchmarkManagedPattern(b *testing.B) {
	policies := []struct {
		name string
		p    softgpu.Prefetch
	}{{"0", softgpu.PrefetchOff}, {"16", softgpu.PrefetchWindow}, {"adaptive", softgpu.PrefetchAdaptive},
		{"density", softgpu.PrefetchDensity}}
	for _, pattern := range []string{"seq", "stride", "random"} {
		for _, pol := range policies {
			b.Run("prefetch="+pol.name+"/pattern="+pattern, func(b *testing.B) {
				benchPattern(b, softgpu.Config{Prefetch: pol.p, ThrashThreshold: -1}, pattern)
			})
		}
	}
}

func benchPattern(b *testing.B, cfg softgpu.Config, pattern string) {
	g := openBench(b, cfg)
	defer g.Close()
	ctx, _, m := managedSetup(b, g, patternPages<<12)
	ch, err := ctx.NewChannel(softgpu.Compute, softgpu.ChannelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	touch := patternTouch(pattern)
	out, err := ctx.Alloc(uint64(8 * len(touch)))
	if err != nil {
		b.Fatal(err)
	}
	batch := ch.NewBatch()
	start := g.ManagedStats()
	var timed time.Duration
	ops := 0
	for b.Loop() {
		if err := m.Sync(); err != nil {
			b.Fatal(err)
		}
		if pattern == "seq" {
			batch.Sum32(out, m.Ptr(), patternPages<<12)
		} else {
			for k, p := range touch {
				batch.Sum32(out+softgpu.Ptr(8*k), m.Ptr()+softgpu.Ptr(p<<12), 4096)
			}
		}
		t0 := time.Now()
		p, err := batch.Submit()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
		timed += time.Since(t0)
		ops++
	}
	s := g.ManagedStats()
	b.ReportMetric(float64(timed.Nanoseconds())/float64(ops), "ns/op")
	migrated := float64(s.ToDevice-start.ToDevice) / float64(ops)
	b.ReportMetric(migrated*4096, "migrated-B/op")
	b.ReportMetric((migrated-float64(len(touch)))*4096, "untouched-B/op")
	reportFaults(b, start, s, ops)
}

// benchOversubscribeReuse runs, at 1.5 times device memory, a hot set of
// one 2 MiB block re-read between reads of each cold block: per op, the
// cold blocks in order, each followed by the hot one. FIFO evicts the hot
// block whenever it is the oldest on the device; the clock sees its
// accessed bits and keeps it. migrated-B/op is what came to the device
// per op, evicted/op the pages that left.
func benchOversubscribeReuse(b *testing.B, e softgpu.Eviction) {
	const block = 2 << 20
	o := oversubscribed(b, softgpu.Config{ThrashThreshold: -1, Prefetch: softgpu.PrefetchDensity, Eviction: e}, block)
	g, m, n, sum, out := o.g, o.m, o.n, o.sum, o.out
	batch := sum.NewBatch()
	start := g.ManagedStats()
	ops := 0
	for b.Loop() {
		for cold := uint64(block); cold < n; cold += block {
			batch.Sum32(out, m.Ptr()+softgpu.Ptr(cold), block)
			batch.Sum32(out, m.Ptr(), block) // the hot block
		}
		p, err := batch.Submit()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Wait(); err != nil {
			b.Fatal(err)
		}
		ops++
	}
	s := g.ManagedStats()
	b.ReportMetric(float64(s.ToDevice-start.ToDevice)*4096/float64(ops), "migrated-B/op")
	b.ReportMetric(float64(s.Evicted-start.Evicted)/float64(ops), "evicted/op")
	b.ReportMetric(float64(s.Referenced-start.Referenced)/float64(ops), "referenced/op")
}

// BenchmarkManagedThrash bounces one page between the device and the
// host: per op the device adds to it (ADD32) and the host reads it after
// Sync. With the guard on (the default threshold) the third quick move
// maps the page remotely — the device reaches it in host memory through
// the DMA window — and the bouncing stops; off, every op moves it both
// ways. moves/op counts pages moved either way, remote/op the times the
// guard mapped it.
func BenchmarkManagedThrash(b *testing.B) {
	for _, guard := range []struct {
		name      string
		threshold int
	}{{"off", -1}, {"on", 0}} {
		b.Run("guard="+guard.name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{Prefetch: softgpu.PrefetchOff, ThrashThreshold: guard.threshold})
			defer g.Close()
			ctx, _, m := managedSetup(b, g, 4096)
			ch, err := ctx.NewChannel(softgpu.Compute, softgpu.ChannelOptions{})
			if err != nil {
				b.Fatal(err)
			}
			start := g.ManagedStats()
			ops := 0
			want := uint32(0)
			for b.Loop() {
				if err := ch.Add32(m.Ptr(), 4096, 1); err != nil {
					b.Fatal(err)
				}
				want++
				if err := m.Sync(); err != nil {
					b.Fatal(err)
				}
				if got := binary.LittleEndian.Uint32(m.Bytes()); got != want {
					b.Fatalf("word 0 after %d ADD32s = %d; want %d", want, got, want)
				}
				ops++
			}
			s := g.ManagedStats()
			b.ReportMetric(float64(s.ToDevice+s.ToHost-start.ToDevice-start.ToHost)/float64(ops), "moves/op")
			b.ReportMetric(float64(s.Remote-start.Remote)/float64(ops), "remote/op")
		})
	}
}
