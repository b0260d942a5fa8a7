package driver

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestResetsCountsOnlyTheContextWhoseCommandHung: on the copy engine a
// SPIN (no preemption point) shares the engine with another context's
// DELAYs, queued behind it or preempted by it; on the compute engine a
// third context's DELAY runs past the limit. The watchdog resets the copy
// engine under the SPIN and stops the long DELAY at a preemption point:
// both contexts are faulted (FaultHung), but only the SPIN's counts a
// reset; the DELAYs in flight on the reset engine complete, and their
// context counts none.
func TestResetsCountsOnlyTheContextWhoseCommandHung(t *testing.T) {
	// 250 ms, as TestWatchdogStopsOnlyTheHungChannel says: far past any
	// wait of a loaded machine, so no 50 ms DELAY is stopped with it.
	const limit = 250 * time.Millisecond
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{Watchdog: uint64(limit.Nanoseconds())})
	guilty, innocent, slow := newContext(t, d), newContext(t, d), newContext(t, d)
	spin := newChannel(t, d, abi.EngineCopy, guilty, ChannelOptions{Priority: abi.PriorityNormal})
	fine := newChannel(t, d, abi.EngineCopy, innocent, ChannelOptions{Priority: abi.PriorityNormal, Timeslice: 100_000})
	long := newChannel(t, d, abi.EngineCompute, slow, ChannelOptions{Priority: abi.PriorityNormal})

	delays := make([]abi.Command, 8)
	for i := range delays {
		delays[i] = abi.Command{Op: abi.OpDelay, Value: 50_000_000} // 50 ms
	}
	inFlight, err := fine.SubmitBatch(delays)
	require.NoError(t, err)
	hung, err := spin.SubmitBatch([]abi.Command{{Op: abi.OpSpin, Value: 1 << 62}})
	require.NoError(t, err)
	stopped, err := long.SubmitBatch([]abi.Command{{Op: abi.OpDelay, Value: 10_000_000_000}}) // 10 s
	require.NoError(t, err)

	hung.Wait()
	require.ErrorIs(t, hung.Err(0), abi.StatusTimeout, "the SPIN")
	stopped.Wait()
	require.ErrorIs(t, stopped.Err(0), abi.StatusTimeout, "the 10 s DELAY")
	inFlight.Wait()
	for i := range delays {
		assert.NoError(t, inFlight.Err(i), "the other context's DELAY %d, on the engine reset under the SPIN", i)
	}

	assert.Equal(t, uint64(1), guilty.Resets(), "the SPIN's context's resets")
	assert.Zero(t, innocent.Resets(), "the resets of the context whose DELAYs shared the reset engine")
	assert.Zero(t, slow.Resets(), "the resets of the context whose DELAY the watchdog stopped at a preemption point")
	for _, c := range []*Context{guilty, slow} {
		var fe *FaultError
		if !errors.As(c.Err(), &fe) || fe.Fault != abi.FaultHung {
			t.Errorf("context %d's error = %v; want FaultHung", c.ID(), c.Err())
		}
	}
	assert.NoError(t, innocent.Err(), "the innocent context's fault")

	// The count is the context's: a new context that takes the id after
	// Close starts from none.
	id := guilty.ID()
	require.NoError(t, guilty.Close())
	assert.Zero(t, guilty.Resets(), "a closed context's resets")
	again := newContext(t, d)
	require.Equal(t, id, again.ID(), "the next context takes the closed one's id (the lowest free)")
	assert.Zero(t, again.Resets(), "the resets of a new context with the id of one reset under")
}

// TestABannedContextRunsNothingMore: after Ban, every command of the
// context fails with StatusBadContext, on its own channel and on either
// engine, while another context's go on; and a Ban that comes after
// Close, when the id has gone to a new context, leaves the new one be.
func TestABannedContextRunsNothingMore(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{})
	banned, other := newContext(t, d), newContext(t, d)
	ch := newChannel(t, d, abi.EngineCopy, banned, ChannelOptions{Priority: abi.PriorityNormal})
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpNop}), "a NOP on the context's channel before its ban")

	banned.Ban()
	assert.ErrorIs(t, ch.Submit(abi.Command{Op: abi.OpNop}), abi.StatusBadContext, "a NOP on the banned context's channel")
	assert.ErrorIs(t, in(d, banned, abi.EngineCompute, abi.Command{Op: abi.OpNop}), abi.StatusBadContext, "a NOP in the banned context on the compute engine")
	assert.NoError(t, in(d, other, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "a NOP in another context")

	id := banned.ID()
	require.NoError(t, banned.Close())
	again := newContext(t, d)
	require.Equal(t, id, again.ID(), "the next context takes the closed one's id (the lowest free)")
	banned.Ban() // late: the id is the new context's now
	assert.NoError(t, in(d, again, abi.EngineCopy, abi.Command{Op: abi.OpNop}), "a NOP in the context that took the id of one banned after its Close")
}

// TestANotifyLooksForResetsWithoutHoldingUpTheInterrupts: softgpud's
// Notify of a served channel looks for a reset (Resets) on the interrupt
// thread, for every fault of the channel. While vm.mu is held — by a
// NewContext, a Context.Close or a Ban of any client — that look must not
// wait for it: the interrupt thread would wait with it, and with the
// thread every interrupt of every other channel (red-team finding F7).
// Here a channel whose Notify looks as the daemon's does faults (a
// doorbell a ring past its head) while the test holds vm.mu, and another
// context's DELAY, whose waiter only the interrupt wakes (WaitBlock; a
// DELAY of 20 ms, so that the waiter is asleep when it completes), must
// complete before the lock is let go.
func TestANotifyLooksForResetsWithoutHoldingUpTheInterrupts(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{Wait: WaitBlock})
	served, other := newContext(t, d), newContext(t, d)
	looking, looked := make(chan struct{}, 1), make(chan uint64, 1)
	faulting := newChannel(t, d, abi.EngineCopy, served, ChannelOptions{Priority: abi.PriorityNormal, Notify: func() {
		select { // the fault's Notify, and Close's later: the test waits for the first
		case looking <- struct{}{}:
		default:
		}
		resets := served.Resets() // as server/hangbars.go's judgeHangs
		select {
		case looked <- resets:
		default:
		}
	}})
	waiting := newChannel(t, d, abi.EngineCompute, other, ChannelOptions{Priority: abi.PriorityNormal})
	require.NoError(t, waiting.Submit(abi.Command{Op: abi.OpNop}), "a NOP before vm.mu is held")

	d.vm.mu.Lock() // as NewContext, Context.Close and Ban hold it
	held := true
	release := func() {
		if held {
			held = false
			d.vm.mu.Unlock()
		}
	}
	defer release()
	faulting.regs.Store(faulting.doorbell+abi.RegDoorbell, faulting.rung+1<<32) // a stranger's store: the engine faults the channel and raises the line
	faulting.wakeIfIdle()
	select {
	case <-looking:
	case <-time.After(mustReturnWithin):
		t.Fatalf("the faulted channel's Notify was not called within %v", mustReturnWithin)
	}
	done := make(chan error, 1)
	go func() { done <- waiting.Submit(abi.Command{Op: abi.OpDelay, Value: 20_000_000}) }()
	select {
	case err := <-done:
		assert.NoError(t, err, "the other context's DELAY, vm.mu held")
	case <-time.After(mustReturnWithin):
		t.Errorf("the other context's DELAY did not complete within %v while vm.mu was held: the interrupt thread waited for the lock in the Notify's Resets", mustReturnWithin)
		release()
		select {
		case err := <-done:
			t.Logf("once vm.mu was let go it completed: %v", err)
		case <-time.After(mustReturnWithin):
			t.Fatalf("the other context's DELAY did not complete after vm.mu was let go either")
		}
	}
	select {
	case resets := <-looked:
		assert.Zero(t, resets, "the faulted channel's context's resets: a doorbell fault is no reset")
	case <-time.After(mustReturnWithin):
		t.Fatalf("the Notify's Resets did not return within %v", mustReturnWithin)
	}
	release()
	assert.ErrorIs(t, faulting.Submit(abi.Command{Op: abi.OpNop}), ErrChannelFaulted, "a NOP on the faulted channel")
}
