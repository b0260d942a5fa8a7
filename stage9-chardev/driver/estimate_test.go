package driver

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestEstimateLearnsARate feeds completions to a channel's estimate on a
// clock of its own: the rate is the first sample, then moves a quarter of
// the way to each next one; a copy that had work expected ahead of it is
// not a sample; and the queue is re-anchored at each completion.
func TestEstimateLearnsARate(t *testing.T) {
	ch := &Channel{estimate: copyEstimate{enabled: true}}
	const mib = 1 << 20
	alone := func(start, took uint64) { // a copy of 1 MiB alone on the engine
		ch.completedCopy(expectation{bytes: mib, start: start, alone: true}, start+took)
	}
	steps := []struct {
		name string
		do   func()
		want uint64 // ps per byte
	}{
		{"first sample", func() { alone(1_000, 52_429) }, 50},               // 52,429 ns / 1 MiB = 50.0 ps/B
		{"second sample", func() { alone(100_000, 104_858) }, 50 + 50/4},    // 100 ps/B: a quarter of the way
		{"slower sample", func() { alone(300_000, 1_048_576) }, 62 + 938/4}, // 1000 ps/B
		{"not alone: no sample", func() {
			ch.completedCopy(expectation{bytes: mib, start: 2e6, due: 2e6 + 100, alone: false}, 2e6+10)
		}, 296},
		{"small copy: no sample", func() {
			ch.completedCopy(expectation{start: 3e6}, 3e6+10) // bytes 0: expect did not cover it
		}, 296},
		{"end before start: no sample", func() { alone(4e6, 0) }, 296},
	}
	for _, s := range steps {
		s.do()
		if got := ch.estimate.rate.Load(); got != s.want {
			t.Fatalf("after %s: rate = %d ps/B; want %d", s.name, got, s.want)
		}
	}
}

// TestEstimateQueuesCopies: a copy queued behind another is expected after
// it, and is not alone; a completion moves what remains by how late or
// early it came, so a wrong estimate does not push every later one off.
func TestEstimateQueuesCopies(t *testing.T) {
	dev, err := device.Open(device.Config{MemorySize: 1 << 16})
	require.NoError(t, err)
	defer dev.Close()
	ch := &Channel{regs: dev.Registers(), estimate: copyEstimate{enabled: true}}
	ch.estimate.rate.Store(1000) // 1 ns per byte: 1 MiB in 1,048,576 cycles
	const mib = 1 << 20
	first := ch.expect(abi.OpCopy, mib, false)
	second := ch.expect(abi.OpCopy, mib, false)
	if !first.alone || first.due != first.start+mib {
		t.Fatalf("first copy: %+v; want alone, due start+%d", first, mib)
	}
	if second.alone || second.due != first.due+mib {
		t.Fatalf("second copy: %+v; want not alone, due %d", second, first.due+mib)
	}
	// The first completes 1,000 cycles after its start, far earlier than
	// expected: the second is now expected a copy's time after that.
	ch.completedCopy(first, first.start+1_000)
	assert.Equal(t, first.start+1_000+mib, ch.estimate.busyUntil.Load(), "after an early completion: busyUntil")
	for _, tt := range []struct {
		op   abi.Opcode
		size uint64
	}{{abi.OpFill, mib}, {abi.OpCopy, MinEstimatedCopy - 1}, {abi.OpNop, 0}} {
		assert.Equal(t, (expectation{}), ch.expect(tt.op, tt.size, false), "expect(%v, %d); want no estimate", tt.op, tt.size)
	}
	ch.estimate.enabled = false // an explicit PollBudget
	assert.Equal(t, (expectation{}), ch.expect(abi.OpCopy, mib, false), "expect with the estimate off; want no estimate")
}

// TestBudgetForAnEstimate: no estimate keeps PollBudget; an estimate
// polls through the expected completion and PollBudget past it, up to
// MaxSizedPoll; one beyond MaxSizedPoll does not poll at all.
func TestBudgetForAnEstimate(t *testing.T) {
	ch := &Channel{pollBudget: DefaultPollBudget}
	for _, tt := range []struct {
		name     string
		exp      expectation
		budget   uint64
		blockNow bool
	}{
		{"no estimate", expectation{}, DefaultPollBudget, false},
		{"no rate yet", expectation{bytes: 1 << 20, start: 5}, DefaultPollBudget, false},
		{"expected soon", expectation{bytes: 1 << 20, start: 5, due: 5 + 10_000}, 10_000 + DefaultPollBudget, false},
		{"expected after the budget", expectation{bytes: 1 << 20, start: 5, due: 5 + 80_000}, 80_000 + DefaultPollBudget, false},
		{"expected near the cap", expectation{bytes: 1 << 20, start: 5, due: 5 + 470_000}, MaxSizedPoll, false},
		{"expected beyond the cap", expectation{bytes: 1 << 20, start: 5, due: 5 + MaxSizedPoll + 1}, 0, true},
	} {
		budget, blockNow := ch.budgetFor(tt.exp)
		if budget != tt.budget || blockNow != tt.blockNow {
			t.Errorf("%s: budgetFor(%+v) = %d, %v; want %d, %v", tt.name, tt.exp, budget, blockNow, tt.budget, tt.blockNow)
		}
	}
}

// TestExplicitBudgetTurnsTheEstimateOff: a PollBudget given in the Config
// is the budget of every wait; the default one may be sized.
func TestExplicitBudgetTurnsTheEstimateOff(t *testing.T) {
	for _, tt := range []struct {
		budget uint64
		sized  bool
	}{{0, true}, {DefaultPollBudget, false}, {150_000, false}} {
		t.Run(fmt.Sprintf("budget=%d", tt.budget), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{PollBudget: tt.budget})
			ch := copyChannel(t, d)
			assert.Equal(t, tt.sized, ch.estimate.enabled, "PollBudget %d: estimate enabled", tt.budget)
		})
	}
}

// TestLargeCopyPollsPastTheDefaultBudget: once the driver has learned the
// copy engine's rate from real copies, a synchronous copy that takes longer
// than DefaultPollBudget — 2 MiB, device to device — but completes within
// the budget its estimate gave it is waited for by polling alone: no
// wake-up. Only copies that did complete within their budget (timed on the
// device clock around the whole Submit, which contains the wait's polling)
// are held to it, so a slow copy on a loaded machine is not a failure; the
// test skips if none qualifies.
func TestLargeCopyPollsPastTheDefaultBudget(t *testing.T) {
	const size = 2 << 20
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	ch := copyChannel(t, d)
	copyOnce := func() {
		require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: 4 << 20, Size: size}))
	}
	for range 8 {
		copyOnce()
	}
	if ch.estimate.rate.Load() == 0 {
		t.Fatal("after 8 copies of 2 MiB the estimate has learned no rate")
	}
	qualified := 0
	for range 20 {
		wakeups := d.Stats().Wakeups
		// What the copy's wait will get: the rate does not change until
		// the copy completes, and nothing else runs on the channel.
		cost := size * ch.estimate.rate.Load() / 1000
		budget, blockNow := ch.budgetFor(expectation{bytes: size, start: 1, due: 1 + cost})
		start := d.Now()
		copyOnce()
		elapsed := d.Now() - start
		if blockNow || elapsed <= DefaultPollBudget || elapsed >= budget {
			continue
		}
		qualified++
		if got := d.Stats().Wakeups - wakeups; got != 0 {
			t.Errorf("a %d-byte copy that took %d cycles, within its budget of %d, blocked: %d wake-ups; want 0", size, elapsed, budget, got)
		}
	}
	t.Logf("%d of 20 copies took between DefaultPollBudget and their sized budget", qualified)
	if qualified == 0 {
		t.Skip("no copy took between DefaultPollBudget and its sized budget (machine too fast or too loaded)")
	}
}

// TestLongEstimateBlocksAtOnce: a copy expected beyond MaxSizedPoll is
// waited for asleep, and the interrupt wakes it. The estimate is made long
// by hand (a learned rate of 1 µs per byte); a DELAY of 200 ms ahead of the
// copy keeps the engine from completing it before the waiter is asleep,
// unless the waiter itself is held off the CPU for that long.
func TestLongEstimateBlocksAtOnce(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 4 << 20}, Config{})
	ch := copyChannel(t, d)
	ch.estimate.rate.Store(maxRate)
	_, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: 200_000_000}})
	require.NoError(t, err)
	wakeups := d.Stats().Wakeups
	require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: 1 << 20, Size: 1 << 19}))
	if got := d.Stats().Wakeups - wakeups; got != 1 {
		t.Errorf("a copy expected in %d cycles: %d wake-ups; want 1", (1<<19)*maxRate/1000, got)
	}
}

// TestWrongEstimatesLoseNoWakeup is the stress test of the sized wait: for
// every delivery path and wake policy, copies of random sizes from several
// goroutines, with DELAYs between them that the estimate does not count,
// while the rate is forced now far too fast (every wait polls too short and
// blocks), now far too slow (every wait blocks at once). Every copy must
// come back; a watchdog of 5 s per copy reports one that does not while its
// fence reads signalled — a lost wake-up. (The commands take microseconds
// to milliseconds; 5 s is slack for a loaded machine under -race.)
func TestWrongEstimatesLoseNoWakeup(t *testing.T) {
	perCombo := 200
	if testing.Short() {
		perCombo = 40
	}
	for _, del := range allDeliveries {
		for _, wake := range allWakes {
			t.Run(fmt.Sprintf("%v/%v", del, wake), func(t *testing.T) {
				d := openWith(t, device.Config{MemorySize: 8 << 20, RingSize: 16}, Config{Delivery: del, Wake: wake})
				ch := copyChannel(t, d)
				var wg sync.WaitGroup
				for g := range 3 {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(g), 13))
						for k := range perCombo / 3 {
							switch rng.IntN(3) {
							case 0:
								ch.estimate.rate.Store(1) // far too fast
							case 1:
								ch.estimate.rate.Store(maxRate) // far too slow
							}
							if k%4 == 0 {
								_, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: uint64(rng.IntN(300_000))}})
								if !assert.NoError(t, err) {
									return
								}
							}
							size := uint64(MinEstimatedCopy + rng.IntN(1<<20))
							src, dst := uint64(g)<<20, uint64(3<<20) // a shared destination: the copies may overlap
							done := make(chan error, 1)
							go func() {
								done <- d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: src, Dst: dst - size + 1<<20, Size: size})
							}()
							select {
							case err := <-done:
								if !assert.NoError(t, err) {
									return
								}
							case <-time.After(5 * time.Second):
								t.Errorf("lost wake-up: a %d-byte copy not back after 5 s (fence %d on the copy channel)", size, d.regs.Load(ch.status+abi.RegFence))
								<-done
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

// copyChannel returns the driver's half of the copy engine's default channel.
func copyChannel(t testing.TB, d *Driver) *Channel {
	t.Helper()
	ch, err := d.Channel(abi.DefaultChannel(abi.EngineCopy))
	require.NoError(t, err)
	return ch
}

// TestAWokenCopyIsNotASample: a copy whose doorbell woke its engine teaches
// the estimate nothing about the rate. The publisher hands the woken
// engine its thread before the waiter reads the clock (publish, handoff in
// idle.go), so the copy's time from its start leaves out whatever the
// engine copied meanwhile, and a rate learnt from it comes out fast
// (estimate.go, expect). With the engines sleeping after every command,
// each copy below wakes one, and after them the estimate has still learnt
// nothing; copies run by a spinning engine are samples again.
func TestAWokenCopyIsNotASample(t *testing.T) {
	const size = 1 << 20
	d := openWith(t, device.Config{MemorySize: 4 << 20}, Config{Idle: Idle{Mode: IdleSleep}})
	ch := copyChannel(t, d)
	copyOnce := func() {
		require.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpCopy, Src: 0, Dst: 2 << 20, Size: size}))
	}
	for range 5 {
		asleep(t, d, 2)
		wakes := d.Stats().EngineWakes
		copyOnce()
		require.Equal(t, wakes+1, d.Stats().EngineWakes, "the copy's doorbell did not wake the engine")
		require.Zero(t, ch.estimate.rate.Load(), "the estimate learnt a rate from copies that each woke their engine")
	}
	require.NoError(t, d.SetIdle(abi.EngineCopy, Idle{Mode: IdleSpin}))
	for range 2 {
		copyOnce()
	}
	assert.NotZero(t, ch.estimate.rate.Load(), "no rate learnt from copies run by a spinning engine")
}
