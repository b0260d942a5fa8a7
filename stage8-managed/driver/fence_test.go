package driver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

var (
	allModes      = []WaitMode{WaitHybrid, WaitPoll, WaitBlock}
	allDeliveries = []Delivery{IRQDirect, IRQThreaded, IRQWorkqueue}
	allWakes      = []Wake{WakeTargeted, WakeEvery}
)

// TestEveryPathAndModeWaits runs a short and a long command through every
// combination of wait mode, delivery path and wake policy.
func TestEveryPathAndModeWaits(t *testing.T) {
	for _, mode := range allModes {
		for _, del := range allDeliveries {
			for _, wake := range allWakes {
				t.Run(fmt.Sprintf("%v/%v/%v", mode, del, wake), func(t *testing.T) {
					d := openWith(t, device.Config{}, Config{Wait: mode, Delivery: del, Wake: wake, PollBudget: 10_000})
					for _, cycles := range []uint64{0, 300_000} { // 300 µs: past the poll budget
						p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: cycles}})
						require.NoError(t, err)
						require.NoError(t, p.Wait(), "Wait after DELAY %d", cycles)
						if !p.Fence().Signaled() {
							t.Fatalf("fence %d not signalled after Wait returned", p.Fence().Value())
						}
					}
				})
			}
		}
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Wait: mode})
			p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			assert.ErrorIs(t, p.WaitContext(ctx), context.DeadlineExceeded, "WaitContext past its deadline")
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(time.Millisecond, cancel)
			assert.ErrorIs(t, p.Fence().WaitContext(ctx), context.Canceled, "Fence.Wait cancelled")
			if n := waitersOf(d, abi.EngineCompute); n != 0 {
				t.Errorf("%d waiters left registered after their contexts ended", n)
			}
		})
	}
}

// TestCloseWakesEveryWaiter blocks many waiters behind a DELAY of centuries
// and closes the driver: each must return ErrClosed or the real, aborted,
// status of its command.
func TestCloseWakesEveryWaiter(t *testing.T) {
	for _, mode := range allModes {
		t.Run(mode.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Wait: mode, PollBudget: 1000})
			long, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}})
			require.NoError(t, err)
			var wg sync.WaitGroup
			errs := make(chan error, 9)
			for range 8 {
				p, err := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpNop}})
				require.NoError(t, err)
				wg.Go(func() { errs <- p.Wait() })
			}
			wg.Go(func() { errs <- long.Wait() })
			time.Sleep(5 * time.Millisecond)
			d.Close()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("waiters still asleep 10 s after Close")
			}
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrClosed) && !errors.Is(err, abi.StatusAborted) {
					t.Errorf("Wait interrupted by Close = %v; want ErrClosed or StatusAborted", err)
				}
			}
		})
	}
}

// TestFencesAcrossTheWrap starts the rings (and so the fence values) just
// below 2^64 and waits, blocking, for fences on both sides of the wrap. A
// timeline compared as timeline >= fence would call fence 2^64-1 reached
// by... nothing, and fence 0 reached by timeline 2^64-2: the first wait
// would hang, the second return early.
func TestFencesAcrossTheWrap(t *testing.T) {
	d := openWith(t, device.Config{Start: 1<<64 - 4}, Config{Wait: WaitBlock})
	for i := range 8 {
		p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{
			{Op: abi.OpDelay, Value: 100_000},
			{Op: abi.OpFill, Dst: 4096, Size: 8, Value: uint64(i)},
		})
		require.NoError(t, err)
		require.NoError(t, p.Wait(), "batch %d (fence %#x)", i, p.Fence().Value())
		got := make([]byte, 1)
		d.CopyFromDevice(got, 4096)
		require.Equal(t, byte(i), got[0], "batch %d (fence %#x): Wait returned before the fill ran", i, p.Fence().Value())
	}
}

// faultBehindADelay sets up a channel fault with commands waiting behind
// it. It submits a NOP and a 50 ms DELAY on e's channel and waits until the
// engine has run the NOP: the engine has taken the batch's tail, and will
// not load the doorbell again until the DELAY is done. It then submits
// queued behind them and overwrites the doorbell with a tail past the
// ring, as a stray store could. When the DELAY ends, the engine faults the
// channel on that doorbell, and never runs queued.
func faultBehindADelay(t testing.TB, d *Driver, e abi.Engine, queued []abi.Command) *Pending {
	t.Helper()
	delay, err := d.SubmitBatch(e, []abi.Command{{Op: abi.OpNop}, {Op: abi.OpDelay, Value: 50_000_000}})
	require.NoError(t, err)
	ch := delay.ch
	waitUntil(t, "the engine ran the NOP before the DELAY", func() bool { return ch.completed(delay.reqs[0].index) })
	p, err := d.SubmitBatch(e, queued)
	require.NoError(t, err)
	ch.regs.Store(ch.doorbell+abi.RegDoorbell, 1<<40)
	// Submitting and storing take microseconds; only a machine stalled
	// for the whole 50 ms lets the DELAY end first, and then the engine
	// may have run queued. Say so rather than test something else.
	if ch.completed(delay.reqs[1].index) {
		t.Fatalf("the DELAY ended before the doorbell was overwritten: this machine stalled the test for 50 ms")
	}
	return p
}

// TestWaitsOnAFaultedChannelSettle: a command queued behind a bad doorbell
// never runs. Waits on it — already polling or asleep when the engine
// faults the channel — must end with ErrChannelFaulted, in every mode and
// on every delivery path, instead of waiting for a fence that will never
// signal.
func TestWaitsOnAFaultedChannelSettle(t *testing.T) {
	for _, mode := range allModes {
		for _, del := range allDeliveries {
			t.Run(fmt.Sprintf("%v/%v", mode, del), func(t *testing.T) {
				d := openWith(t, device.Config{}, Config{Wait: mode, Delivery: del, PollBudget: 10_000})
				queued := faultBehindADelay(t, d, abi.EngineCopy, []abi.Command{{Op: abi.OpNop}})
				type result struct {
					what string
					err  error
				}
				results := make(chan result, 2)
				go func() { results <- result{"Fence.Wait", queued.Fence().Wait()} }()
				go func() { results <- result{"Pending.Wait", queued.Wait()} }()
				// A settled wait returns at once; 10 s is a wait that
				// never will, not a slow machine.
				deadline := time.After(10 * time.Second)
				for range 2 {
					select {
					case r := <-results:
						assert.ErrorIs(t, r.err, ErrChannelFaulted, "%s on the command behind the bad doorbell", r.what)
					case <-deadline:
						t.Fatalf("a wait on the command behind the bad doorbell still waits 10 s after the fault")
					}
				}
				// Waits that start after the fault must not sleep, nor
				// take the fault for a signal.
				assert.ErrorIs(t, queued.Fence().Wait(), ErrChannelFaulted, "Fence.Wait after the fault")
				assert.ErrorIs(t, queued.Wait(), ErrChannelFaulted, "Pending.Wait after the fault")
			})
		}
	}
}

func TestFencesOnBothEngines(t *testing.T) {
	d := openWith(t, device.Config{}, Config{Wait: WaitBlock})
	a, _ := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 200_000}})
	b, _ := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: 400_000}})
	for _, f := range []Fence{a.Fence(), b.Fence()} {
		require.NoError(t, f.Wait(), "Wait on %v's fence", f.Channel())
	}
	if !a.Fence().Signaled() || !b.Fence().Signaled() {
		t.Errorf("fences signalled after their waits: compute %v, copy %v", a.Fence().Signaled(), b.Fence().Signaled())
	}
	if a.Fence().Channel() == b.Fence().Channel() {
		t.Errorf("both fences on %v; want one per engine's channel", a.Fence().Channel())
	}
	if !(Fence{}).Signaled() || (Fence{}).Wait() != nil {
		t.Errorf("the zero Fence is not signalled")
	}
}

// TestTargetedWakeupsAreNeverFutile blocks one waiter on the last of eight
// fenced commands. Targeted, the device interrupts once, when that fence is
// reached, and the waiter wakes once. Untargeted, every completion
// interrupts and wakes it, and all but the last wake-up are futile.
//
// The waiter must be asleep before the first of the eight completes, or
// there is nothing to wake: a 50 ms DELAY goes first, and the test checks
// that the waiter registered while it ran, repeating the scenario if the
// machine was too slow for that — or, untargeted, too slow to take the
// interrupts one at a time.
func TestTargetedWakeupsAreNeverFutile(t *testing.T) {
	for _, wake := range allWakes {
		t.Run(wake.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Wait: WaitBlock, Wake: wake})
			for attempt := 1; ; attempt++ {
				before := d.Stats()
				gate, _ := d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: 50_000_000}})
				var last *Pending
				// Each later attempt spaces the eight fences four times as
				// far apart (20 µs, then 80 µs, ...; see below).
				step := uint64(20_000) << (2 * (attempt - 1))
				for range 8 {
					last, _ = d.SubmitBatch(abi.EngineCompute, []abi.Command{{Op: abi.OpDelay, Value: step}})
				}
				done := make(chan error, 1)
				go func() { done <- last.Wait() }()
				for waitersOf(d, abi.EngineCompute) == 0 && !gate.Fence().Signaled() {
					time.Sleep(100 * time.Microsecond)
				}
				registeredInTime := !gate.Fence().Signaled()
				require.NoError(t, <-done)
				if !registeredInTime {
					if attempt == 5 {
						t.Fatal("in 5 attempts the waiter never went to sleep within a 50 ms DELAY")
					}
					continue
				}
				s := d.Stats()
				irqs, wakeups, futile := s.IRQs-before.IRQs, s.Wakeups-before.Wakeups, s.FutileWakeups-before.FutileWakeups
				switch wake {
				case WakeTargeted:
					if irqs != 1 || wakeups != 1 || futile != 0 {
						t.Errorf("targeted: %d interrupts, %d wake-ups, %d futile; want 1, 1, 0", irqs, wakeups, futile)
					}
				case WakeEvery:
					// 9 fenced completions (the gate and eight) each raise
					// the line (the driver may take several raises at
					// once); those after the waiter slept woke it, and
					// only the last can have found its fence — or none
					// did: a waiter woken for nothing that re-arms just
					// after its fence signalled returns without sleeping
					// again (block's "signalled while arming"), and that
					// return is no wake-up. An interrupt thread
					// slower than the spacing of the fences (a loaded
					// machine) takes them all at once, which is allowed:
					// then no wake-up was futile, and the test tries
					// again with the fences further apart.
					if wakeups == 1 && futile == 0 && attempt < 5 {
						continue
					}
					if irqs < 2 || futile < 1 || (wakeups != futile+1 && wakeups != futile) {
						t.Errorf("every: %d interrupts, %d wake-ups, %d futile; want ≥ 2, futile ≥ 1, wake-ups = futile or futile+1", irqs, wakeups, futile)
					}
				}
				return
			}
		})
	}
}

// TestNoLostWakeups is the stress test. For every wait mode, delivery path
// and wake policy, submitters put random short batches on random engines
// while waiters wait on pendings picked at random — so targets arrive out of
// order, some already signalled, some far ahead — and the submitters pause
// now and then, so the device goes idle behind a waiter that is arming.
// Every wait carries a 5 s watchdog: a wait that times out while its fence
// reads signalled is a lost wake-up. (The commands take microseconds; 5 s is
// slack for a loaded machine under -race, not a speed requirement.)
func TestNoLostWakeups(t *testing.T) {
	perCombo := 300
	if testing.Short() {
		perCombo = 60
	}
	for _, mode := range allModes {
		for _, del := range allDeliveries {
			for _, wake := range allWakes {
				t.Run(fmt.Sprintf("%v/%v/%v", mode, del, wake), func(t *testing.T) {
					d := openWith(t, device.Config{RingSize: 16}, Config{Wait: mode, Delivery: del, Wake: wake, PollBudget: 2_000})
					stress(t, d, perCombo)
				})
			}
		}
	}
}

func stress(t testing.TB, d *Driver, total int) {
	pendings := make(chan *Pending, total)
	var submitters, waiters sync.WaitGroup
	for s := range 2 {
		submitters.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			for range total / 2 {
				batch := make([]abi.Command, 1+rng.IntN(3))
				for i := range batch {
					batch[i] = abi.Command{Op: abi.OpDelay, Value: uint64(rng.IntN(20_000))}
				}
				p, err := d.SubmitBatch(abi.Engine(rng.IntN(abi.NumEngines)), batch)
				if !assert.NoError(t, err) {
					return
				}
				pendings <- p
				// Now and then let the device go idle, so that waiters arm
				// for fences that have just signalled with nothing behind
				// them: the case a lost wake-up would leave asleep forever.
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
		})
	}
	var mu sync.Mutex
	var pool []*Pending
	var waited int
	for w := range 6 {
		waiters.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for {
				mu.Lock()
				for len(pendings) > 0 {
					pool = append(pool, <-pendings)
				}
				if waited == total {
					mu.Unlock()
					return
				}
				if len(pool) == 0 {
					mu.Unlock()
					time.Sleep(10 * time.Microsecond)
					continue
				}
				k := rng.IntN(len(pool)) // a random target, not the oldest
				p := pool[k]
				pool = append(pool[:k], pool[k+1:]...)
				waited++
				mu.Unlock()

				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := p.WaitContext(ctx)
				cancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded) && p.Fence().Signaled():
					t.Errorf("lost wake-up: fence %d on %v signalled, its waiter still asleep after 5 s", p.Fence().Value(), p.Fence().Channel())
				case err != nil:
					t.Errorf("Wait (fence %d on %v) = %v", p.Fence().Value(), p.Fence().Channel(), err)
				}
			}
		})
	}
	submitters.Wait()
	waiters.Wait()
}

// waitersOf returns how many waiters are blocked on engine e's timeline.
func waitersOf(d *Driver, e abi.Engine) int {
	tl := &d.channels[abi.DefaultChannel(e)].Load().timeline
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.waiters)
}

// TestConfigIsChecked: a wait mode, delivery path or wake policy that names
// nothing is refused at New with ErrConfig naming the field — an unknown
// delivery path would otherwise leave every blocked wait without a wake-up.
func TestConfigIsChecked(t *testing.T) {
	for _, tt := range []struct {
		cfg   Config
		field string
	}{
		{Config{Wait: 7}, "Wait"},
		{Config{Delivery: 9}, "Delivery"},
		{Config{Wake: -1}, "Wake"},
	} {
		dev, err := device.Open(device.Config{MemorySize: 1 << 16})
		require.NoError(t, err)
		_, err = New(dev, tt.cfg)
		dev.Close()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("New(%+v) = %v; want ErrConfig naming %s", tt.cfg, err, tt.field)
		}
	}
}

// TestUndefinedFlagsNeverHangAWaiter: a batch whose only command carries a
// flag bit that is not defined is refused before it reaches the device —
// it never leaves a fence nobody will write.
func TestUndefinedFlagsNeverHangAWaiter(t *testing.T) {
	d := openWith(t, device.Config{}, Config{Wait: WaitBlock})
	_, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpNop, Flags: 0x80}})
	assert.ErrorIs(t, err, abi.StatusBadFlags, "SubmitBatch with flag 0x80")
	assert.ErrorIs(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: 0x80}), abi.StatusBadFlags, "Submit with flag 0x80")
}

// TestNoLostWakeupsOnFreshFences is the sharpest case for the arming
// handshake: a waiter blocks on the fence of a NOP it has just submitted,
// with nothing queued behind it, so the fence is written while the waiter
// is between its first look and arming. If the waiter's re-check after
// arming were missing, the fence would be written unseen, no interrupt
// would come, and the wait would time out with its fence signalled.
func TestNoLostWakeupsOnFreshFences(t *testing.T) {
	rounds := 2000
	if testing.Short() {
		rounds = 300
	}
	for _, del := range allDeliveries {
		t.Run(del.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Wait: WaitBlock, Delivery: del})
			for i := range rounds {
				p, err := d.SubmitBatch(abi.Engine(i%abi.NumEngines), []abi.Command{{Op: abi.OpNop}})
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = p.WaitContext(ctx)
				cancel()
				require.NoError(t, err, "round %d: Wait = %v (fence signalled: %v): a lost wake-up", i, err, p.Fence().Signaled())
			}
		})
	}
}
