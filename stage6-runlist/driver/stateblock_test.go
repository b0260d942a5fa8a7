package driver

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/device"
)

// TestANewChannelsStateBlockStartsEmpty: the state block NewChannel hands a
// channel is cleared, whatever an earlier user of that id (or an earlier
// driver of the device) left in it. Here the block is left holding a
// "saved" command; an engine reset — a spin on another channel that the
// watchdog must stop — makes the engine read every listed channel's block
// again, and a block that still says saved would be resumed, and fault the
// new channel that never ran anything. (Mutation S6-24: NewChannel no
// longer clears the block.)
func TestANewChannelsStateBlockStartsEmpty(t *testing.T) {
	const limit = 100 * time.Millisecond
	d := openWith(t, device.Config{MemorySize: 8 << 20}, Config{Watchdog: uint64(limit.Nanoseconds())})
	hungCtx, other := newContext(t, d), newContext(t, d)
	hung := newChannel(t, d, abi.EngineCompute, hungCtx, ChannelOptions{})
	next := hung.id + 1
	st := d.runlists.stateBlock(next)
	mem := d.hw.Memory()
	binary.LittleEndian.PutUint64(mem[st+abi.StateFlags:], abi.StateSaved) // left over from an earlier owner
	binary.LittleEndian.PutUint64(mem[st+abi.StateSeq:], 5)
	fresh := newChannel(t, d, abi.EngineCompute, other, ChannelOptions{})
	require.Equal(t, next, fresh.id, "the new channel's id")
	p, err := hung.SubmitBatch([]abi.Command{{Op: abi.OpSpin, Value: 60_000_000_000}})
	require.NoError(t, err)
	p.Wait()
	require.ErrorIs(t, p.Err(0), abi.StatusTimeout, "the spin")
	// The engine completes the spin, then resets: wait for the reset.
	require.Eventually(t, func() bool { return d.SchedStats().Resets != 0 }, 10*time.Second, time.Millisecond, "an engine reset for the spin")
	require.NoError(t, fresh.Submit(abi.Command{Op: abi.OpNop}), "a NOP on the new channel after the reset")
	require.NoError(t, other.Err(), "the new channel's context")
}
