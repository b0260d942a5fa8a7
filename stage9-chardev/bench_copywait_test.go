package softgpu_test

import (
	"errors"
	"os"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/driver"
)

// BenchmarkCopyWait puts the two host waits of a pinned copy side by side
// in one process, so that one record holds both: the copies of
// BenchmarkH2D and BenchmarkD2H (mem=pinned), waited for
//
//	wait=default    at the driver's defaults: the sized wait
//	                (driver/estimate.go), which polls through the copy's
//	                expected completion, or blocks at once if that is more
//	                than MaxSizedPoll away
//	wait=poll150us  with a fixed poll budget of 150 µs, what the
//	                copies-polled record asks of every row through
//	                SOFTGPU_POLL_BUDGET=150000: longer than a 1 MiB copy
//	                takes here, so that copy never pays a wake-up
//
// In each pass the two rows of a size run one after the other, so a drift
// of the machine between passes falls on both; compare them within a pass.
// The question they answer is the cost of the default wait: at 1 MiB the
// default row should come within a few percent of the polled one, having
// polled about as long; at 16 MiB, far past MaxSizedPoll, the default
// sleeps at once and the polled wait polls 150 µs before it sleeps too.
// Each row also reports wakeups/op (reportWaits): how many of its copies'
// waits blocked, which is what the budget decides; and wakes/op, how many
// of its doorbells found the copy engine asleep, which the budget does not
// decide: the engine's own idle budget (50 µs) is about as long as the
// host's write of 1 MiB, so in some runs the engine sleeps before most
// copies and in others before almost none. Compare the rows' ns/op only
// where their wakes/op agree.
//
// SOFTGPU_POLL_BUDGET, when set, sets both rows' budget (openBench): a
// record made with it has no default row to compare.
func BenchmarkCopyWait(b *testing.B) {
	for _, dir := range []struct {
		name string
		dir  direction
	}{{"H2D", toDevice}, {"D2H", fromDevice}} {
		for _, n := range []int{1 << 20, 16 << 20} {
			size := "1MiB"
			if n == 16<<20 {
				size = "16MiB"
			}
			for _, w := range []struct {
				name   string
				budget uint64 // cycles of the device clock, which are nanoseconds; 0: the default
			}{{"default", 0}, {"poll150us", 150_000}} {
				b.Run("dir="+dir.name+"/size="+size+"/wait="+w.name, func(b *testing.B) {
					benchPinned(b, n, dir.dir, softgpu.Config{PollBudget: w.budget})
				})
			}
		}
	}
}

// BenchmarkCopyWaitAlternate asks BenchmarkCopyWait's question with the
// two waits interleaved copy by copy on one GPU and one channel, so that
// both meet the same engine, the same placement of the threads on the
// cores and the same moment of the machine. BenchmarkCopyWait's rows run
// one after the other, seconds apart, and on a 2-core guest two rows that
// take the very same code path differ by a fifth from one run to the next:
// more than the few percent the comparison is about.
//
// Each iteration is a pair of copies of size bytes, one waited for at the
// driver's defaults and one with a 150 µs poll budget (the WaitBudget
// hook), in the order default-polled, then polled-default in the next
// iteration, so that neither budget always follows the other. The host
// produces or consumes the buffer around every copy, as in measureCopies.
// It reports
//
//	ns/op          the mean time of one copy, both waits together
//	default-ns     the mean time of a copy waited for at the defaults
//	poll150us-ns   the mean time of a copy waited for with 150 µs
//	rate-ratio     poll150us-ns ÷ default-ns: the default wait's
//	               bandwidth as a share of the polled wait's
//	default-wakeups, poll150us-wakeups
//	               the share of each wait's copies whose waiter blocked
//	               and was woken (Stats.Wakeups, read around each copy)
//	cores          CPU time per wall time of the whole process
//
// The estimate learns from both waits' copies, as the default wait's
// estimate learns from every copy it sees; the polled copies are timed
// the same either way.
func BenchmarkCopyWaitAlternate(b *testing.B) {
	for _, dir := range []struct {
		name string
		dir  direction
	}{{"H2D", toDevice}, {"D2H", fromDevice}} {
		b.Run("dir="+dir.name+"/size=1MiB", func(b *testing.B) {
			benchAlternate(b, 1<<20, dir.dir)
		})
	}
}

// benchAlternate is BenchmarkCopyWaitAlternate's body: copies of n bytes
// in direction dir, waited for alternately at the defaults and with a
// 150 µs poll budget.
func benchAlternate(b *testing.B, n int, dir direction) {
	const polled = 150_000 // cycles of the device clock, which are nanoseconds
	g := openBench(b, softgpu.Config{})
	defer g.Close()
	if os.Getenv("SOFTGPU_POLL_BUDGET") != "" {
		b.Skip("SOFTGPU_POLL_BUDGET sets every wait's budget: there is no default wait to alternate with")
	}
	var budget uint64 // read and written by this goroutine only: the waiter is the copier
	g.SetHooks(driver.Hooks{WaitBudget: func() uint64 { return budget }})
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

	var took, wakes [2]uint64 // [0]: the default wait, [1]: the polled one
	var copies [2]uint64
	oneCopy := func(arm int) {
		if dir == toDevice {
			produce(host, byte(copies[0]+copies[1]))
		}
		budget = 0
		if arm == 1 {
			budget = polled
		}
		before := g.Stats().Wakeups
		start := time.Now()
		if dir == toDevice {
			err = g.Write(p, host)
		} else {
			err = g.Read(host, p)
		}
		took[arm] += uint64(time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		wakes[arm] += g.Stats().Wakeups - before
		copies[arm]++
		if dir == fromDevice {
			sink += consume(host)
		}
	}
	m := startMeter()
	for i := 0; b.Loop(); i++ {
		first := i & 1 // 0: default first; 1: polled first
		oneCopy(first)
		oneCopy(1 - first)
	}
	m.report(b)
	mean := func(arm int) float64 { return float64(took[arm]) / float64(copies[arm]) }
	b.ReportMetric(float64(took[0]+took[1])/float64(copies[0]+copies[1]), "ns/op")
	b.ReportMetric(mean(0), "default-ns")
	b.ReportMetric(mean(1), "poll150us-ns")
	b.ReportMetric(mean(1)/mean(0), "rate-ratio")
	b.ReportMetric(float64(wakes[0])/float64(copies[0]), "default-wakeups")
	b.ReportMetric(float64(wakes[1])/float64(copies[1]), "poll150us-wakeups")
}
