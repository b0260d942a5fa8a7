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

// TestAPreemptTimeoutStopsASpinThatHoldsAnotherChannel: with a preempt
// timeout and no watchdog, a SPIN of ten seconds holds its engine only
// until another channel wants it and the timeout has passed. The other
// context's command completes; the SPIN fails with StatusTimeout, and its
// channel and context are faulted as the watchdog's reset faults them.
func TestAPreemptTimeoutStopsASpinThatHoldsAnotherChannel(t *testing.T) {
	const timeout = 50 * time.Millisecond
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{PreemptTimeout: uint64(timeout.Nanoseconds())})
	for e := range abi.Engine(abi.NumEngines) {
		assert.Equal(t, uint64(timeout.Nanoseconds()), d.regs.Load(abi.EngineControlPage(e)+abi.RegPreemptTimeout), "%v's RegPreemptTimeout", e)
	}
	hungCtx, other := newContext(t, d), newContext(t, d)
	// The SPIN's channel is of higher priority, so the engine runs the
	// SPIN first whenever both have work: the NOP always waits behind it,
	// until it has aged past every priority (1 ms) and the engine asks
	// the SPIN to give way.
	hung := newChannel(t, d, abi.EngineCopy, hungCtx, ChannelOptions{Priority: abi.PriorityHigh})
	fine := newChannel(t, d, abi.EngineCopy, other, ChannelOptions{Priority: abi.PriorityNormal})
	p, err := hung.SubmitBatch([]abi.Command{{Op: abi.OpSpin, Value: 10_000_000_000}, {Op: abi.OpNop}}) // 10 s
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, fine.Submit(abi.Command{Op: abi.OpNop}), "the other context's NOP, behind the SPIN")
	// Five seconds is a hundred timeouts, and half the SPIN.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the other context's NOP took %v behind a SPIN under a %v preempt timeout", took, timeout)
	}
	p.Wait()
	require.ErrorIs(t, p.Err(0), abi.StatusTimeout, "the SPIN")
	assert.ErrorIs(t, p.Err(1), ErrChannelFaulted, "the command behind the SPIN")
	var fe *FaultError
	if !errors.As(hungCtx.Err(), &fe) || fe.Fault != abi.FaultHung {
		t.Errorf("the SPIN's context's error = %v; want FaultHung", hungCtx.Err())
	}
	assert.NoError(t, other.Err(), "the other context's error")
	assert.Equal(t, uint64(1), hungCtx.Resets(), "the SPIN's context's resets, which softgpud judges its user by")
	assert.Zero(t, other.Resets(), "the other context's resets")
	if s := d.SchedStats(); s.Timeouts != 1 || s.Resets != 1 {
		t.Errorf("SchedStats() = %+v; want one timeout and one reset", s)
	}
}

// TestNoPreemptTimeoutByDefault: a zero Config leaves RegPreemptTimeout
// at its reset value, none, as it leaves the watchdog off.
func TestNoPreemptTimeoutByDefault(t *testing.T) {
	d := openWith(t, device.Config{}, Config{})
	for e := range abi.Engine(abi.NumEngines) {
		assert.Zero(t, d.regs.Load(abi.EngineControlPage(e)+abi.RegPreemptTimeout), "%v's RegPreemptTimeout", e)
	}
}
