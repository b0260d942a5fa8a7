package driver

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/internal/leakcheck"
)

// wakeCounter is a device whose WakeEngine calls are counted, per engine.
type wakeCounter struct {
	Hardware
	wakes [abi.NumEngines]atomic.Int64
}

func (w *wakeCounter) WakeEngine(e abi.Engine) {
	w.wakes[e].Add(1)
	w.Hardware.WakeEngine(e)
}

// TestAReplayWakesOnlyAStalledEngine: with both engines sleeping as soon
// as they are idle, the copy engine FILLs managed memory the host has, so
// every FILL stalls on a fault and waits for the driver's replay, asleep.
// Every FILL completes — the replay woke the copy engine — and the compute
// engine, which has no channel stalled, is never woken: a replay is work
// only for an engine that holds a stalled channel (abi/managed.go).
// Before RegStalled, each replay woke the compute engine too, which then
// spun out its idle budget on the cores the host's thread wanted.
func TestAReplayWakesOnlyAStalledEngine(t *testing.T) {
	leakcheck.Check(t)
	dev, err := device.Open(device.Config{MemorySize: 4 << 20})
	require.NoError(t, err)
	hw := &wakeCounter{Hardware: dev}
	d, err := New(hw, Config{Idle: Idle{Mode: IdleSleep}})
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c := newContext(t, d)
	cp, err := d.NewChannel(abi.EngineCopy, c, ChannelOptions{})
	require.NoError(t, err)
	const size = 64 << 10
	replays := d.ManagedStats().Replays
	computeWakes := hw.wakes[abi.EngineCompute].Load()
	const rounds = 20
	for round := range rounds {
		// A new allocation each round: its pages are the host's, and have
		// no history for the thrashing guard to map remotely.
		m := allocManaged(t, c, size)
		mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: size, Value: uint64(round)})
		mustSync(t, m)
		for i, b := range m.Bytes() {
			if b != byte(round) {
				t.Fatalf("round %d: byte %d = %#x after FILL %#x and Sync", round, i, b, byte(round))
			}
		}
		require.NoError(t, m.Free())
	}
	assert.GreaterOrEqual(t, d.ManagedStats().Replays-replays, uint64(rounds), "replays: every FILL should have faulted")
	assert.Equal(t, computeWakes, hw.wakes[abi.EngineCompute].Load(), "wake-ups of the compute engine, which had no channel stalled")
}
