package softgpu_test

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	softgpu "softgpu/stage6-runlist"
)

// The benchmarks of idle gating. Every other benchmark runs under the
// default idle configuration, hybrid with a 50 µs budget, unless the
// environment says otherwise (idleFromEnv); Gap and Quiet keep their names
// and measure that default. The families here set the idle mode
// themselves, whatever the environment.

// idleFromEnv lets the environment choose the idle configuration of every
// benchmark that opens its device with openBench, so that records can be
// made per mode (SOFTGPU_POLL_BUDGET, how long the host's waits poll, is
// read beside it: pollBudgetFromEnv):
//
//	SOFTGPU_IDLE=spin|sleep|hybrid|adaptive   the mode (default hybrid)
//	SOFTGPU_IDLE_BUDGET=<cycles>              the hybrid budget (default 50000)
func idleFromEnv(b *testing.B, cfg *softgpu.Config) {
	b.Helper()
	if v := os.Getenv("SOFTGPU_IDLE"); v != "" {
		mode, ok := map[string]softgpu.IdleMode{"spin": softgpu.IdleSpin, "sleep": softgpu.IdleSleep,
			"hybrid": softgpu.IdleHybrid, "adaptive": softgpu.IdleAdaptive}[v]
		if !ok {
			b.Fatalf("SOFTGPU_IDLE=%q; want spin, sleep, hybrid or adaptive", v)
		}
		cfg.Idle = mode
	}
	if v := os.Getenv("SOFTGPU_IDLE_BUDGET"); v != "" {
		budget, err := strconv.ParseUint(v, 10, 64)
		if err != nil || budget == 0 {
			b.Fatalf("SOFTGPU_IDLE_BUDGET=%q; want a positive number of cycles", v)
		}
		cfg.IdleBudget = budget
	}
}

// idleModes are the configurations of the IdleGap and IdleQuiet families.
var idleModes = []struct {
	name   string
	mode   softgpu.IdleMode
	budget uint64
}{
	{"spin", softgpu.IdleSpin, 0},
	{"sleep", softgpu.IdleSleep, 0},
	{"hybrid10us", softgpu.IdleHybrid, 10_000},
	{"hybrid50us", softgpu.IdleHybrid, 50_000},
	{"hybrid200us", softgpu.IdleHybrid, 200_000},
	{"adaptive", softgpu.IdleAdaptive, 0},
}

// openIdle opens a device in the given idle configuration, ignoring the
// environment.
func openIdle(b *testing.B, mode softgpu.IdleMode, budget uint64) *softgpu.GPU {
	b.Helper()
	withCanary(b)
	g, err := softgpu.Open(softgpu.Config{Idle: mode, IdleBudget: budget})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkIdleGap is Gap in each idle configuration: ns/op is the median
// latency of the 64-byte fill that breaks a quiet gap the host slept
// through, with the mean and percentiles beside it, cores, and wakes/op —
// the fraction of those fills whose doorbell found the copy engine asleep
// and had to wake it.
func BenchmarkIdleGap(b *testing.B) {
	for _, idle := range idleModes {
		for _, gap := range gaps {
			b.Run("idle="+idle.name+"/gap="+gap.name, func(b *testing.B) {
				g := openIdle(b, idle.mode, idle.budget)
				defer g.Close()
				wakes := g.Stats().EngineWakes
				fills := measureGap(b, g, gap.d)
				b.ReportMetric(float64(g.Stats().EngineWakes-wakes)/float64(fills), "wakes/op")
			})
		}
	}
}

// BenchmarkIdleQuiet is Quiet in each idle configuration: the cores an
// open device burns with no work at all.
func BenchmarkIdleQuiet(b *testing.B) {
	for _, idle := range idleModes {
		b.Run("idle="+idle.name, func(b *testing.B) {
			g := openIdle(b, idle.mode, idle.budget)
			defer g.Close()
			measureQuiet(b)
		})
	}
}

// BenchmarkIdleWake is the wake-up alone, seen from the device: the copy
// engine sleeps (IdleSleep), the host sleeps through a gap, submits a
// 64-byte fill asynchronously, and spins on its fence — yielding every 64
// polls as the driver's waits do (waker=yield), or never (waker=busy: an
// application that goes on computing after it submits). ns/op is the
// median time from the submit call to the engine's fence stamp, read on the
// device clock. The pair shows what the driver's handoff (driver/idle.go)
// is for: remove it and waker=busy waits for the runtime to move the
// engine to another thread.
func BenchmarkIdleWake(b *testing.B) {
	for _, waker := range []string{"yield", "busy"} {
		for _, gap := range gaps[2:] {
			b.Run("waker="+waker+"/gap="+gap.name, func(b *testing.B) {
				g := openIdle(b, softgpu.IdleSleep, 0)
				defer g.Close()
				p := mustAlloc(b, g, 64)
				var lat latencies
				m := startMeter()
				for b.Loop() {
					sleepFor(gap.d)
					start := g.Now()
					pending, err := g.FillAsync(p, 64, 1)
					if err != nil {
						b.Fatal(err)
					}
					f := pending.Fence()
					for polls := 1; !f.Signaled(); polls++ {
						if waker == "yield" && polls%64 == 0 {
							runtime.Gosched()
						}
					}
					// The engine stamps the fence just after it stores it
					// (device/fence.go, signal), so a poller can see the
					// fence while SignaledAt still holds the previous
					// fill's stamp, from before start. Wait for this
					// fill's: the latency can then never be negative.
					signaledAt := f.SignaledAt()
					for int64(signaledAt-start) < 0 {
						signaledAt = f.SignaledAt()
					}
					lat = append(lat, time.Duration(signaledAt-start))
					if err := pending.Wait(); err != nil {
						b.Fatal(err)
					}
				}
				m.report(b)
				lat.report(b)
			})
		}
	}
}

// mixes are the gap distributions of IdleMix, each a function from the
// fill's number to the gap before it:
//
//	short    every gap 20 µs: under every budget but sleep's
//	long     every gap 1 ms: over every budget
//	bimodal  half 5 µs, half 1 ms, in a random order (seeded)
//	drift    from 20 µs up to 1 ms over 64 fills, again and again: a
//	         workload whose gaps lengthen as it runs
var mixes = []struct {
	name string
	gap  func(i int, rng *rand.Rand) time.Duration
}{
	{"short", func(int, *rand.Rand) time.Duration { return 20 * time.Microsecond }},
	{"long", func(int, *rand.Rand) time.Duration { return time.Millisecond }},
	{"bimodal", func(_ int, rng *rand.Rand) time.Duration {
		if rng.IntN(2) == 0 {
			return 5 * time.Microsecond
		}
		return time.Millisecond
	}},
	{"drift", func(i int, _ *rand.Rand) time.Duration {
		step := float64(i%64) / 63 // 0 to 1, then again
		return time.Duration(20_000 * math.Pow(50, step))
	}},
}

// BenchmarkIdleMix is Gap with gaps drawn from a distribution (mixes), for
// the idle configurations an application might choose: a fixed 50 µs
// budget, the adaptive budget, sleep and spin. The host sleeps through each
// gap. ns/op is the median latency of the fill after a gap, p99-ns its
// tail, and cores the bill.
func BenchmarkIdleMix(b *testing.B) {
	configs := []struct {
		name   string
		mode   softgpu.IdleMode
		budget uint64
	}{{"hybrid50us", softgpu.IdleHybrid, 50_000}, {"adaptive", softgpu.IdleAdaptive, 0},
		{"sleep", softgpu.IdleSleep, 0}, {"spin", softgpu.IdleSpin, 0}}
	for _, idle := range configs {
		for _, mix := range mixes {
			b.Run("idle="+idle.name+"/mix="+mix.name, func(b *testing.B) {
				g := openIdle(b, idle.mode, idle.budget)
				defer g.Close()
				p := mustAlloc(b, g, 64)
				rng := rand.New(rand.NewPCG(7, 7))
				var lat latencies
				m := startMeter()
				for i := 0; b.Loop(); i++ {
					sleepFor(mix.gap(i, rng))
					start := time.Now()
					if err := g.Fill(p, 64, 1); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				m.report(b)
				lat.report(b)
			})
		}
	}
}

// BenchmarkIdleMixPaired is IdleMix for the two configurations the choice
// of a default is between — hybrid50us and adaptive — on the mixes whose
// gaps change, measured in turns within one run, so that whatever state
// the machine is in falls on both alike. IdleMix measures each
// configuration in its own row, seconds apart, and on this machine a
// row's 99th percentile can move by ×2 and more from one pass to the next
// while the configuration stays the same.
//
// Both devices are open at once. The host takes pairedBlock gaps on one,
// then pairedBlock on the other, and so on; each device sees the mix's own
// sequence of gaps, continued from block to block (one full drift ramp per
// block). Between blocks the host sleeps pairedSettle, untimed, so that the
// device it leaves has spun out its budget and sleeps before the other's
// block is billed; the first fill of each block, which wakes a device that
// has slept through the other's block, is not counted. To each adaptive
// engine that sleep is one long gap in every pairedBlock+1, a small tilt
// towards sleeping that IdleMix does not have.
//
// Reported, per configuration: the median and 99th percentile of the fill
// after a gap (hybrid50us-ns, hybrid50us-p99-ns, adaptive-ns,
// adaptive-p99-ns) and its bill (hybrid50us-cores, adaptive-cores: process
// CPU over the wall time of its own blocks; the other device is asleep
// throughout), and adaptive's figure over the default's (p99-ratio,
// cores-ratio: under 1 is adaptive's better). ns/op is go test's own, the
// wall time per gap with the settles: how long the row took, not a
// latency.
func BenchmarkIdleMixPaired(b *testing.B) {
	configs := [2]struct {
		name   string
		mode   softgpu.IdleMode
		budget uint64
	}{{"hybrid50us", softgpu.IdleHybrid, 50_000}, {"adaptive", softgpu.IdleAdaptive, 0}}
	for _, mix := range mixes {
		if mix.name != "bimodal" && mix.name != "drift" {
			continue
		}
		b.Run("mix="+mix.name, func(b *testing.B) {
			type side struct {
				g         *softgpu.GPU
				p         softgpu.Ptr
				rng       *rand.Rand
				i         int // the next gap's number in the mix's sequence
				lat       latencies
				cpu, wall time.Duration // the bill of its blocks
			}
			var sides [2]side
			for k, c := range configs {
				g := openIdle(b, c.mode, c.budget)
				defer g.Close()
				sides[k] = side{g: g, p: mustAlloc(b, g, 64), rng: rand.New(rand.NewPCG(7, 7))}
			}
			cur, inBlock := 0, 0 // the side whose block it is, and the gaps taken in it
			blockCPU, blockWall := cpuTime(), time.Now()
			endBlock := func() {
				sides[cur].cpu += cpuTime() - blockCPU
				sides[cur].wall += time.Since(blockWall)
			}
			for b.Loop() {
				if inBlock == pairedBlock {
					endBlock()
					cur, inBlock = 1-cur, 0
					sleepFor(pairedSettle)
					blockCPU, blockWall = cpuTime(), time.Now()
				}
				s := &sides[cur]
				sleepFor(mix.gap(s.i, s.rng))
				s.i++
				start := time.Now()
				if err := s.g.Fill(s.p, 64, 1); err != nil {
					b.Fatal(err)
				}
				// A block's first fill woke a device that slept through
				// the other's block — except the very first, whose gap
				// is the mix's own.
				if took := time.Since(start); inBlock > 0 || s.i == 1 {
					s.lat = append(s.lat, took)
				}
				inBlock++
			}
			endBlock()
			var p99, cores [2]float64
			for k, c := range configs {
				s := &sides[k]
				if len(s.lat) == 0 {
					return // a run too short to reach both sides: no figures
				}
				p99[k] = s.lat.percentile(0.99)
				b.ReportMetric(s.lat.percentile(0.50), c.name+"-ns")
				b.ReportMetric(p99[k], c.name+"-p99-ns")
				if s.wall >= minMeterWindow {
					cores[k] = float64(s.cpu) / float64(s.wall)
					b.ReportMetric(cores[k], c.name+"-cores")
				}
			}
			b.ReportMetric(p99[1]/p99[0], "p99-ratio")
			if cores[0] > 0 && cores[1] > 0 {
				b.ReportMetric(cores[1]/cores[0], "cores-ratio")
			}
		})
	}
}

// pairedBlock is how many gaps IdleMixPaired takes on one device before it
// turns to the other: one period of the drift mix.
const pairedBlock = 64

// pairedSettle is IdleMixPaired's pause between blocks: far longer than any
// budget, so that the device left behind is asleep when the next block
// starts.
const pairedSettle = 2 * time.Millisecond
