package softgpu_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	softgpu "softgpu/stage4-nolock"
	"softgpu/stage4-nolock/driver"
)

// The benchmarks of stage 4: stage 3's, unchanged — Submit now runs
// lock-free, and reports ctxsw/op. Their names are a contract (DESIGN.md
// §5): every later stage keeps each one, measuring the same user-visible
// operation with that stage's default configuration, so benchstat can
// compare stages row by row. Each reports "cores", the CPU the whole
// process burned per wall second.

func openBench(b *testing.B, cfg softgpu.Config) *softgpu.GPU {
	b.Helper()
	g, err := softgpu.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

var engines = []softgpu.Engine{softgpu.Copy, softgpu.Compute}

// BenchmarkRoundTrip is one NOP submitted and waited for: the cost of the
// submission path there and back, with nothing to do in between.
func BenchmarkRoundTrip(b *testing.B) {
	for _, e := range engines {
		b.Run("engine="+e.String(), func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			m := startMeter()
			for b.Loop() {
				if err := g.Nop(e); err != nil {
					b.Fatal(err)
				}
			}
			m.report(b)
		})
	}
}

// BenchmarkFill is one 64-byte fill on the copy engine, submitted and waited for.
func BenchmarkFill(b *testing.B) {
	b.Run("size=64B", func(b *testing.B) {
		g := openBench(b, softgpu.Config{})
		defer g.Close()
		p := mustAlloc(b, g, 64)
		m := startMeter()
		for b.Loop() {
			if err := g.Fill(p, 64, 0xab); err != nil {
				b.Fatal(err)
			}
		}
		m.report(b)
	})
}

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
		})
	}
}

var copySizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkH2D copies an ordinary Go slice to device memory (mem=pageable:
// since stage 3, through the bounce buffers) or pinned memory from
// HostAlloc (mem=pinned: one COPY by the engine, from stage 3).
func BenchmarkH2D(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, write) })
	}
	for _, sz := range copySizes {
		b.Run("mem=pinned/size="+sz.name, func(b *testing.B) { benchPinned(b, sz.n, write) })
	}
}

// BenchmarkD2H copies device memory to an ordinary Go slice, or to pinned
// memory; see BenchmarkH2D.
func BenchmarkD2H(b *testing.B) {
	for _, sz := range copySizes {
		b.Run("mem=pageable/size="+sz.name, func(b *testing.B) { benchPageable(b, sz.n, read) })
	}
	for _, sz := range copySizes {
		b.Run("mem=pinned/size="+sz.name, func(b *testing.B) { benchPinned(b, sz.n, read) })
	}
}

// write and read are the two directions of a copy, as one signature: host
// memory to device memory at p, and back.
func write(g *softgpu.GPU, p softgpu.Ptr, host []byte) error { return g.Write(p, host) }
func read(g *softgpu.GPU, p softgpu.Ptr, host []byte) error  { return g.Read(host, p) }

// benchPageable times one copy between n bytes of device memory and an
// ordinary Go slice whose pages have been touched.
func benchPageable(b *testing.B, n int, transfer func(*softgpu.GPU, softgpu.Ptr, []byte) error) {
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	p := mustAlloc(b, g, uint64(n))
	host := touched(n)
	b.SetBytes(int64(n))
	m := startMeter()
	for b.Loop() {
		if err := transfer(g, p, host); err != nil {
			b.Fatal(err)
		}
	}
	m.report(b)
}

// BenchmarkSubmit has N goroutines each submitting 64-byte fills to its own
// buffer on the copy engine and waiting for each; ns/op is per fill across
// all of them, so perfect scaling would divide it by N. From stage 4 the
// submissions take no lock, and ctxsw/op counts the process's context
// switches per fill.
func BenchmarkSubmit(b *testing.B) {
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("submitters=%d", n), func(b *testing.B) {
			g := openBench(b, softgpu.Config{MemorySize: 1 << 20})
			defer g.Close()
			bufs := make([]softgpu.Ptr, n)
			for i := range bufs {
				bufs[i] = mustAlloc(b, g, 64)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			m := startMeter()
			b.ResetTimer()
			for i := range n {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := g.Fill(bufs[i], 64, byte(i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			m.report(b)
			m.reportSwitches(b)
		})
	}
}

var gaps = []struct {
	name string
	d    time.Duration
}{{"0", 0}, {"3us", 3 * time.Microsecond}, {"30us", 30 * time.Microsecond},
	{"300us", 300 * time.Microsecond}, {"3ms", 3 * time.Millisecond}}

// BenchmarkGap is the latency of a 64-byte fill that follows a quiet gap in
// which the device got no work. ns/op is the median latency of that fill
// alone (measured around the call, not the gap), with the mean and
// percentiles beside it.
func BenchmarkGap(b *testing.B) {
	for _, gap := range gaps {
		b.Run("gap="+gap.name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{})
			defer g.Close()
			measureGap(b, g, gap.d)
		})
	}
}

// measureGap lets the device sit quiet for gap before each 64-byte fill,
// times the fill, and reports the latencies and the process's cores. It
// returns how many fills it timed.
func measureGap(b *testing.B, g *softgpu.GPU, gap time.Duration) int {
	p := mustAlloc(b, g, 64)
	var lat latencies
	m := startMeter()
	for b.Loop() {
		idleFor(gap)
		start := time.Now()
		if err := g.Fill(p, 64, 1); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	m.report(b)
	lat.report(b)
	return len(lat)
}

// BenchmarkQuiet keeps an open device idle, quietSleep per iteration; the
// figure is its bill in cores (ns/op is suppressed: it is just the sleep).
func BenchmarkQuiet(b *testing.B) {
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	measureQuiet(b)
}

// measureQuiet sleeps quietSleep per iteration, while whatever device the
// caller opened sits idle, and reports the process's cores over that time.
func measureQuiet(b *testing.B) {
	m := startMeter()
	for b.Loop() {
		time.Sleep(quietSleep)
	}
	m.report(b)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSpinYield is RoundTrip/engine=copy with the spinning loops (both
// engines' and the host's wait) yielding every N polls, or never: what the
// yield in pollLoop buys on a machine with fewer cores than spinners.
//
// Each run stops at spinYieldDeadline and reports its own ns/op. With no
// yield anywhere a round trip costs either well under a microsecond or
// ~20 ms (until the Go scheduler preempts a spinner), and the regime can
// change between the runs go test makes to choose b.N: a b.N chosen at
// 0.6 µs and run at 20 ms would take hours. The deadline is checked every
// 16 round trips, so the clock read costs the fast rows almost nothing.
func BenchmarkSpinYield(b *testing.B) {
	for _, every := range []int{1, 64, 1024, -1} {
		name := fmt.Sprint(every)
		if every < 0 {
			name = "never"
		}
		b.Run("every="+name, func(b *testing.B) {
			g := openBench(b, softgpu.Config{YieldEvery: every})
			defer g.Close()
			m := startMeter()
			b.ResetTimer()
			start := time.Now()
			done := 0
			for done < b.N {
				if err := g.Nop(softgpu.Copy); err != nil {
					b.Fatal(err)
				}
				done++
				if done%16 == 0 && time.Since(start) > spinYieldDeadline {
					break
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(done), "ns/op")
			m.report(b)
		})
	}
}

// spinYieldDeadline bounds one run of SpinYield (see there).
const spinYieldDeadline = 2 * time.Second

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

// benchFenceWake submits 30 µs of DELAY as fences separate batches (one fence
// each) and blocks on the last; it reports the signal-to-running latency and the
// interrupts and wake-ups per waited fence.
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

// BenchmarkBaseline measures the machine itself, in the same run as the
// stage's figures, so each can be read as a fraction of what is possible.
// No device is open while these run.
func BenchmarkBaseline(b *testing.B) {
	// pingpong: two goroutines bounce one cache line, pure spin — the
	// floor under any round trip between a host and an engine thread. It
	// is also the canary that tools/cmd/record measures around every pass.
	b.Run("pingpong", func(b *testing.B) {
		var ball paddedWord
		done := make(chan struct{})
		go func() {
			defer close(done)
			for polls := 1; ; polls++ {
				v := ball.v.Load()
				if v == ^uint64(0) {
					return
				}
				if v%2 == 1 {
					ball.v.Store(v + 1)
				}
				if polls%(1<<12) == 0 { // only matters with GOMAXPROCS=1
					runtime.Gosched()
				}
			}
		}()
		m := startMeter()
		var v uint64
		for b.Loop() {
			v += 2
			ball.v.Store(v - 1) // serve: odd
			// The partner returns it: even.
			for polls := 1; ball.v.Load() != v; polls++ {
				if polls%(1<<12) == 0 {
					runtime.Gosched()
				}
			}
		}
		m.report(b)
		ball.v.Store(^uint64(0))
		<-done
	})
	// memmove: a plain copy between two Go slices, the ceiling for any
	// copy the CPU does on the device's behalf.
	for _, sz := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run("memmove/size="+sz.name, func(b *testing.B) {
			src, dst := touched(sz.n), touched(sz.n)
			b.SetBytes(int64(sz.n))
			m := startMeter()
			for b.Loop() {
				copy(dst, src)
			}
			m.report(b)
		})
	}
}

type paddedWord struct {
	_ [64]byte
	v atomic.Uint64
	_ [56]byte
}

// touched returns n bytes whose pages have all been written once, so that a
// benchmark times copies, not the kernel's first-touch page faults.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// benchPinned runs one copy direction of n bytes between device memory and
// pinned host memory: copyFn is Write, or Read with its arguments turned
// round. Without the right to pin n bytes (RLIMIT_MEMLOCK; 8 MiB by
// default for an unprivileged user) the row is skipped, with the error
// saying what to raise.
func benchPinned(b *testing.B, n int, copyFn func(g *softgpu.GPU, p softgpu.Ptr, host []byte) error) {
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	p := mustAlloc(b, g, uint64(n))
	host, err := g.HostAlloc(uint64(n))
	if errors.Is(err, driver.ErrPinLimit) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer g.HostFree(host)
	b.SetBytes(int64(n))
	m := startMeter()
	for b.Loop() {
		if err := copyFn(g, p, host.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	m.report(b)
}

// quietSleep is how long Quiet sleeps per iteration. Waking from a sleep
// costs the benchmark itself CPU (about 45 µs on the measured machine): at
// 1 ms a sleep that alone would read 0.045 cores, as much as the bill being
// measured; at 10 ms it is under 0.005.
const quietSleep = 10 * time.Millisecond
