package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of channels and runlists, the driver's half: opening and
// closing channels while others stream, the watchdog, bad options.

// newChannel opens a channel that is closed when the test ends.
func newChannel(t testing.TB, d *Driver, e abi.Engine, c *Context, opts ChannelOptions) *Channel {
	t.Helper()
	ch, err := d.NewChannel(e, c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { ch.Close() })
	return ch
}

// TestChannelOptionsAreChecked: a bad engine, no context, a priority above
// the maximum each fail with an error that says so; runlists fill up, and
// a closed channel's id comes back.
func TestChannelOptionsAreChecked(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20, ContextSize: 4096}, Config{}) // every channel's save area fits
	ctx := d.DefaultContext()
	if _, err := d.NewChannel(abi.NumEngines, ctx, ChannelOptions{}); !errors.Is(err, ErrNoEngine) {
		t.Errorf("NewChannel on engine %d = %v; want ErrNoEngine", abi.NumEngines, err)
	}
	if _, err := d.NewChannel(abi.EngineCopy, nil, ChannelOptions{}); !errors.Is(err, ErrContext) {
		t.Errorf("NewChannel without a context = %v; want ErrContext", err)
	}
	if _, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{Priority: abi.MaxPriority + 1}); !errors.Is(err, ErrRunlist) {
		t.Errorf("NewChannel with priority %d = %v; want ErrRunlist", abi.MaxPriority+1, err)
	}
	def, _ := d.Channel(abi.DefaultChannel(abi.EngineCopy))
	assert.ErrorIs(t, def.Close(), ErrNoChannel, "closing a default channel")
	var chs []*Channel
	for {
		ch, err := d.NewChannel(abi.Engine(len(chs)%abi.NumEngines), ctx, ChannelOptions{Priority: abi.PriorityNormal})
		if err != nil {
			// Each engine's runlist is full (its default channel and 63
			// more) just as the ids run out.
			if !errors.Is(err, ErrRunlist) && !errors.Is(err, ErrNoChannel) {
				t.Fatalf("channel %d: %v; want ErrRunlist or ErrNoChannel when they run out", len(chs), err)
			}
			break
		}
		chs = append(chs, ch)
	}
	if want := abi.NumEngines * (abi.MaxRunlist - 1); len(chs) != want {
		t.Fatalf("opened %d channels; want %d (full runlists)", len(chs), want)
	}
	for _, ch := range chs {
		require.NoError(t, ch.Submit(abi.Command{Op: abi.OpNop}), "%v", ch.ID())
	}
	id, e := chs[7].ID(), chs[7].Engine()
	require.NoError(t, chs[7].Close())
	again, err := d.NewChannel(e, ctx, ChannelOptions{})
	if err != nil || again.ID() != id {
		t.Fatalf("after closing %v: NewChannel = %v, %v; want that id back", id, again, err)
	}
	require.NoError(t, again.Submit(abi.Command{Op: abi.OpNop}), "the reopened channel")
	for i, ch := range chs {
		if i != 7 {
			ch.Close()
		}
	}
	again.Close()
}

// TestClosingAChannelWithQueuedWork: closing a channel with commands
// queued ends every one of them — run, or StatusRemoved, or ErrClosed for
// one published after the drain — and loses none: each waiter returns, and
// the commands that ran are exactly those whose status says so.
//
// Nothing waits on the clock: the channel is closed once its first batch
// has signalled, so some commands have run, and the last batch's DELAY
// never ends on its own, so some are still queued whatever the scheduler
// does. (An earlier version slept 1 ms and closed then; a test goroutine
// held off the CPU for the 10 ms the queue takes — a loaded machine under
// -race — found every command run and none to remove.)
func TestClosingAChannelWithQueuedWork(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	ch, err := d.NewChannel(abi.EngineCompute, d.DefaultContext(), ChannelOptions{Priority: abi.PriorityNormal})
	require.NoError(t, err)
	const n = 100
	counter, _ := d.Alloc(64)
	cmds := make([]abi.Command, n)
	for i := range cmds {
		// A DELAY, then an ADD32 that counts: 100 µs of work a batch.
		cmds[i] = abi.Command{Op: abi.OpAdd32, Dst: counter, Size: 4, Value: 1}
	}
	delays := make([]abi.Command, n)
	for i := range delays {
		delays[i] = abi.Command{Op: abi.OpDelay, Value: 100_000}
	}
	delays[n-1].Value = 1 << 62 // ends only when Close takes the channel off the engine
	var pendings []*Pending
	for i := range n {
		p, err := ch.SubmitBatch([]abi.Command{delays[i], cmds[i]})
		require.NoError(t, err)
		pendings = append(pendings, p)
	}
	waitUntil(t, "the channel's first batch done", pendings[0].Fence().Signaled)
	require.NoError(t, ch.Close())
	ran, removed := 0, 0
	for _, p := range pendings {
		p.Wait()
		for k := range 2 {
			err := p.Err(k)
			switch {
			case err == nil:
				if k == 1 {
					ran++
				}
			case errors.Is(err, abi.StatusRemoved) || errors.Is(err, ErrClosed):
				if k == 1 {
					removed++
				}
			default:
				t.Fatalf("a command of the closed channel: %v", err)
			}
		}
	}
	got := binary.LittleEndian.Uint32(d.hw.Memory()[counter:])
	if int(got) != ran || ran+removed != n || removed == 0 {
		t.Fatalf("the counter is %d; %d ADD32s reported run and %d removed of %d (want the counter equal to those run, none lost, some removed)",
			got, ran, removed, n)
	}
	assert.ErrorIs(t, ch.Submit(abi.Command{Op: abi.OpNop}), ErrClosed, "Submit after Close")
	assert.NoError(t, d.Submit(abi.EngineCompute, abi.Command{Op: abi.OpNop}), "the engine's default channel after the close")
}

// TestRunlistChangesWhileChannelsStream: channels opened and closed over
// and over on both engines while long-lived channels stream ADD32s; every
// long-lived channel's counter ends at exactly the number of its commands
// that succeeded — no command lost or run twice by a runlist change — and
// every one succeeded.
func TestRunlistChangesWhileChannelsStream(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{Idle: Idle{Mode: IdleHybrid, Budget: 5_000}})
	ctx := d.DefaultContext()
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	type stream struct {
		ch      *Channel
		counter uint64
		ok      atomic.Int64
	}
	var streams []*stream
	for k, prio := range []uint8{abi.PriorityLow, abi.PriorityNormal, abi.PriorityHigh} {
		for _, e := range []abi.Engine{abi.EngineCompute} {
			counter, _ := d.Alloc(64)
			streams = append(streams, &stream{ch: newChannel(t, d, e, ctx, ChannelOptions{Priority: prio, Timeslice: uint64(k) * 10_000}), counter: counter})
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Go(func() {
			batch := []abi.Command{{Op: abi.OpAdd32, Dst: s.counter, Size: 4, Value: 1}, {Op: abi.OpAdd32, Dst: s.counter, Size: 4, Value: 1},
				{Op: abi.OpDelay, Value: 2_000}}
			for !stop.Load() {
				p, err := s.ch.SubmitBatch(batch)
				if !assert.NoError(t, err, "%v", s.ch.ID()) {
					return
				}
				if !assert.NoError(t, p.Wait(), "%v", s.ch.ID()) {
					return
				}
				s.ok.Add(2)
			}
		})
	}
	for i := range rounds {
		e := abi.Engine(i % abi.NumEngines)
		ch, err := d.NewChannel(e, ctx, ChannelOptions{Priority: uint8(i % (abi.MaxPriority + 1))})
		require.NoError(t, err)
		_, err = ch.SubmitBatch([]abi.Command{{Op: abi.OpDelay, Value: 20_000}, {Op: abi.OpNop}})
		require.NoError(t, err)
		require.NoError(t, ch.Close())
	}
	stop.Store(true)
	wg.Wait()
	for _, s := range streams {
		got := binary.LittleEndian.Uint32(d.hw.Memory()[s.counter:])
		if int64(got) != s.ok.Load() || got == 0 {
			t.Errorf("%v: counter %d, %d ADD32s succeeded", s.ch.ID(), got, s.ok.Load())
		}
	}
}

// TestWatchdogStopsOnlyTheHungChannel: a command that runs past the
// watchdog's limit fails with StatusTimeout; its channel is faulted (a
// command queued behind it fails too, and its waiter returns), its context
// records FaultHung; another context's channel and the default channel on
// the same engine go on.
func TestWatchdogStopsOnlyTheHungChannel(t *testing.T) {
	// The limit counts a command's time on the engine in the device's
	// clock, which runs while the engine's goroutine waits for a CPU: at
	// 2 ms, a loaded machine once stopped one of the other channel's
	// 50 µs DELAYs too (seen under -race with other packages running).
	// 250 ms is far past any such wait, and still stops the 10 s DELAY
	// within the test's bound.
	const limit = 250 * time.Millisecond
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{Watchdog: uint64(limit.Nanoseconds())})
	hungCtx, other := newContext(t, d), newContext(t, d)
	hung := newChannel(t, d, abi.EngineCopy, hungCtx, ChannelOptions{Priority: abi.PriorityNormal})
	fine := newChannel(t, d, abi.EngineCopy, other, ChannelOptions{Priority: abi.PriorityNormal, Timeslice: 100_000})
	start := time.Now()
	p, err := hung.SubmitBatch([]abi.Command{{Op: abi.OpDelay, Value: 10_000_000_000}, {Op: abi.OpNop}}) // 10 s
	require.NoError(t, err)
	for range 20 { // the other channel shares the engine meanwhile
		require.NoError(t, fine.Submit(abi.Command{Op: abi.OpDelay, Value: 50_000}), "the other context's channel while one hangs")
	}
	p.Wait()
	require.ErrorIs(t, p.Err(0), abi.StatusTimeout, "the 10 s DELAY")
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("the watchdog took %v to stop a %v limit", elapsed, limit)
	}
	assert.ErrorIs(t, p.Err(1), ErrChannelFaulted, "the command behind the hung one")
	assert.ErrorIs(t, hung.Submit(abi.Command{Op: abi.OpNop}), abi.FaultTimeout, "Submit on the hung channel; want its fault, FaultTimeout")
	var fe *FaultError
	if !errors.As(hungCtx.Err(), &fe) || fe.Fault != abi.FaultHung {
		t.Errorf("the hung context's error = %v; want FaultHung", hungCtx.Err())
	}
	if err := fine.Submit(abi.Command{Op: abi.OpNop}); err != nil || other.Err() != nil {
		t.Errorf("the other context after the timeout: %v, %v", err, other.Err())
	}
	assert.NoError(t, d.Submit(abi.EngineCopy, abi.Command{Op: abi.OpNop}), "the default channel after the timeout")
	if s := d.SchedStats(); s.Timeouts != 1 {
		t.Errorf("SchedStats().Timeouts = %d; want 1", s.Timeouts)
	}
}

// TestAChannelStampsItsContext: a command submitted on a context's channel
// runs in that context whatever its Ctx said: the driver writes the
// channel's context into every descriptor.
func TestAChannelStampsItsContext(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	c := newContext(t, d)
	va, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	ch := newChannel(t, d, abi.EngineCopy, c, ChannelOptions{})
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: 0, Dst: va, Size: 64, Value: 0x3c}))
	if got := readPA(d, paOf(t, c, va), 64); got[0] != 0x3c || got[63] != 0x3c {
		t.Fatalf("the fill did not land in the context's page")
	}
}

// TestAFaultedChannelsIDComesBackClean: a channel faulted by a bad
// doorbell and then closed gives its id back, and the next channel to get
// that id starts clean — served, its commands completing — instead of
// inheriting the fault. Before, the device kept the fault on the channel
// and the driver refused every later NewChannel that picked the lowest
// free id: one faulted channel closed the device to new channels.
func TestAFaultedChannelsIDComesBackClean(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	ctx := d.DefaultContext()
	for round := range 3 {
		ch, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{Priority: abi.PriorityNormal})
		require.NoError(t, err, "round %d: NewChannel after a faulted channel closed", round)
		require.NoError(t, ch.Submit(abi.Command{Op: abi.OpNop}), "round %d", round)
		ch.regs.Store(ch.doorbell+abi.RegDoorbell, ch.regs.Load(ch.doorbell+abi.RegDoorbell)+1<<40)
		ch.wakeIfIdle() // the engine may have gone to sleep after the NOP: a bad doorbell still needs it awake to be seen
		waitUntil(t, "the engine faulted the channel", func() bool { return ch.faultError() != nil })
		require.ErrorIs(t, ch.Submit(abi.Command{Op: abi.OpNop}), ErrChannelFaulted, "round %d: Submit on the faulted channel", round)
		id := ch.ID()
		require.NoError(t, ch.Close(), "round %d: Close of the faulted channel", round)
		again, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{Priority: abi.PriorityNormal})
		require.NoError(t, err, "round %d: NewChannel after closing faulted %v; want a clean channel", round, id)
		require.Equal(t, id, again.ID(), "round %d: the new channel is %v; want the freed %v (the lowest free id)", round, again.ID(), id)
		for range 2 * int(again.size) { // more than a lap: every slot and completion entry reused
			require.NoError(t, again.Submit(abi.Command{Op: abi.OpNop}), "round %d: a command on the reused %v", round, id)
		}
		require.NoError(t, again.Close())
	}
}

// TestARunlistChangeDoesNotWaitForALongCommand: opening or closing a
// channel while another channel of the engine runs a long command takes
// effect at the command's next boundary — the engine saves it and takes
// the new runlist — not when it ends. Before, the engine looked for a new
// runlist only between commands, and one long DELAY held up every
// NewChannel and Close on its engine (in stage 9, every other client's).
func TestARunlistChangeDoesNotWaitForALongCommand(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	ctx := d.DefaultContext()
	long := newChannel(t, d, abi.EngineCopy, ctx, ChannelOptions{Priority: abi.PriorityNormal})
	p, err := long.SubmitBatch([]abi.Command{{Op: abi.OpNop}, {Op: abi.OpDelay, Value: 5_000_000_000}})
	require.NoError(t, err)
	waitUntil(t, "the engine ran the NOP before the DELAY", func() bool { return long.completed(p.reqs[0].index) })
	other, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{Priority: abi.PriorityNormal})
	require.NoError(t, err)
	if long.completed(p.reqs[1].index) {
		t.Fatal("NewChannel returned only after the 5 s DELAY had run to its end")
	}
	require.NoError(t, other.Submit(abi.Command{Op: abi.OpNop}), "a NOP on the new channel beside the DELAY")
	require.NoError(t, other.Close())
	require.NoError(t, long.Close())
	if long.completed(p.reqs[1].index) && p.Wait() == nil {
		t.Fatal("the DELAY ran to its end before its channel's Close returned")
	}
}

// TestChannelsOpenAndCloseOnBothEnginesAtOnce: each engine's list has a
// lock of its own, and channel ids one of their own (runlists.ids), so
// opens and closes on the two engines run at once. No id may be held by
// two open channels, every command must complete, and once all are
// closed every id must be free again: the lowest comes back first.
func TestChannelsOpenAndCloseOnBothEnginesAtOnce(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 64 << 20}, Config{})
	c := d.DefaultContext()
	var held sync.Map // id → the goroutine holding it
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := abi.Engine(g % abi.NumEngines)
			for i := range 100 {
				ch, err := d.NewChannel(e, c, ChannelOptions{Priority: abi.PriorityNormal})
				if err != nil {
					errs <- fmt.Errorf("goroutine %d, round %d: NewChannel on %v: %w", g, i, e, err)
					return
				}
				if other, dup := held.LoadOrStore(ch.ID(), g); dup {
					errs <- fmt.Errorf("goroutine %d, round %d: %v is held by goroutine %d too", g, i, ch.ID(), other)
					return
				}
				if err := ch.Submit(abi.Command{Op: abi.OpNop}); err != nil {
					errs <- fmt.Errorf("goroutine %d, round %d: a NOP on %v: %w", g, i, ch.ID(), err)
					return
				}
				held.Delete(ch.ID())
				if err := ch.Close(); err != nil {
					errs <- fmt.Errorf("goroutine %d, round %d: Close of %v: %w", g, i, ch.ID(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ch, err := d.NewChannel(abi.EngineCopy, c, ChannelOptions{Priority: abi.PriorityNormal})
	require.NoError(t, err)
	assert.Equal(t, abi.Channel(abi.NumEngines), ch.ID(), "the first channel after every other closed: the lowest id")
	require.NoError(t, ch.Close())
}
