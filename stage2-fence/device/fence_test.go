package device

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage2-fence/abi"
)

// waitFence waits until channel c's timeline reads want. run returns when
// the completion entry is written; the engine writes the fence just after.
func waitFence(t testing.TB, d *Device, c abi.Channel, want uint64) {
	t.Helper()
	status := abi.ChannelStatusPage(c)
	waitFor(t, "the fence timeline reached its value", func() bool { return d.Registers().Load(status+abi.RegFence) == want })
}

// takeInterrupts drains line as the driver's interrupt thread would — take
// the token, read the causes, acknowledge them — until it is empty or
// closed, and returns how many tokens it took and the causes and channels
// it saw.
func takeInterrupts(d *Device, line <-chan struct{}) (tokens int, causes, channels uint64) {
	regs := d.Registers()
	for {
		select {
		case _, ok := <-line:
			if !ok {
				return
			}
			tokens++
			c := regs.Load(abi.RegIrqCause)
			regs.Store(abi.RegIrqCause, c)
			ch := regs.Load(abi.RegIrqChannels)
			regs.Store(abi.RegIrqChannels, ch)
			causes |= c
			channels |= ch
		default:
			return
		}
	}
}

func TestFencedCommandWritesTheTimeline(t *testing.T) {
	d := openTest(t, Config{})
	regs := d.Registers()
	c := abi.DefaultChannel(abi.EngineCopy)
	status := abi.ChannelStatusPage(c)
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 42}), "fenced NOP")
	waitFence(t, d, c, 42)
	waitFor(t, "the fence was stamped", func() bool { return regs.Load(status+abi.RegFenceCycles) != 0 })
	if cycles, now := regs.Load(status+abi.RegFenceCycles), regs.Load(abi.RegTimestamp); cycles > now {
		t.Errorf("RegFenceCycles = %d; want a moment between open and now (%d)", cycles, now)
	}
	// A command that fails still completes, and its fence still signals.
	require.Equal(t, abi.StatusOutOfRange, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Flags: abi.FlagFence, Fence: 43, Dst: 1 << 40, Size: 1}), "fenced FILL out of range")
	waitFence(t, d, c, 43)
	// A command refused for undefined flags still writes the fence it
	// asked for: the refusal is in its status, and a waiter on the fence
	// must not wait forever.
	require.Equal(t, abi.StatusBadFlags, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence | 0x80, Fence: 44}), "NOP with flag 0x80")
	waitFence(t, d, c, 44)
	// Without FlagFence the timeline stays where it was.
	run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Fence: 99})
	d.stop() // anything the engines were going to write is written
	assert.Equal(t, uint64(44), regs.Load(status+abi.RegFence), "RegFence after an unfenced command; want 44 still")
	if got := regs.Load(abi.ChannelStatusPage(abi.DefaultChannel(abi.EngineCompute)) + abi.RegFence); got != 0 {
		t.Errorf("the compute channel's timeline moved to %d; fences are per channel", got)
	}
}

// TestInterruptArming checks when the line is raised, for every arm value:
// the count, the cause and the channel's bit.
func TestInterruptArming(t *testing.T) {
	const fenceIrq = abi.FlagFence | abi.FlagInterrupt
	tests := []struct {
		name   string
		arm    uint64
		target uint64
		cmds   []abi.Command
		want   int // interrupts raised
	}{
		{"off", abi.IrqOff, 0, []abi.Command{{Op: abi.OpNop, Flags: fenceIrq, Fence: 1}}, 0},
		{"every", abi.IrqEvery, 0, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 1},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 2},
			{Op: abi.OpNop, Flags: abi.FlagFence, Fence: 3}, // no FlagInterrupt: no interrupt
		}, 2},
		{"target not reached", abi.IrqTarget, 5, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 3},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 4},
		}, 0},
		{"target reached once, then passed", abi.IrqTarget, 5, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 4},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 5},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 6},
		}, 2},
		{"target across the wrap", abi.IrqTarget, 1<<64 - 1, []abi.Command{
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 1<<64 - 2},
			{Op: abi.OpNop, Flags: fenceIrq, Fence: 0},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t, Config{})
			line := d.Interrupts()
			c := abi.DefaultChannel(abi.EngineCompute)
			user, status := abi.DoorbellPage(c), abi.ChannelStatusPage(c)
			d.Registers().Store(user+abi.RegIrqTarget, tt.target)
			d.Registers().Store(user+abi.RegIrqArm, tt.arm)
			for _, cmd := range tt.cmds {
				require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCompute, cmd), "%+v", cmd)
			}
			// run returns when the completion is written; the interrupt
			// is raised after the fence, a moment later. Stopping the
			// engines waits for any interrupt they were raising.
			d.stop()
			assert.Equal(t, uint64(tt.want), d.Registers().Load(status+abi.RegIrqCount), "RegIrqCount; want %d", tt.want)
			tokens, causes, channels := takeInterrupts(d, line)
			if tokens == 0 || causes&abi.IrqCauseStopped == 0 {
				t.Errorf("no IrqCauseStopped after the device stopped (tokens %d, causes %#b)", tokens, causes)
			}
			assert.Equal(t, (tt.want > 0), causes&abi.IrqCauseFence != 0, "IrqCauseFence seen; want %v", tt.want > 0)
			if tt.want > 0 && channels != 1<<c {
				t.Errorf("RegIrqChannels = %#b; want only %v's bit", channels, c)
			}
		})
	}
}

// TestTheLineHoldsOneToken: interrupts raised while the driver has not
// looked merge into one token, and none is lost: after the driver takes it
// and acknowledges, a new raise gives a new token.
func TestTheLineHoldsOneToken(t *testing.T) {
	d := openTest(t, Config{})
	line := d.Interrupts()
	c := abi.DefaultChannel(abi.EngineCopy)
	d.Registers().Store(abi.DoorbellPage(c)+abi.RegIrqArm, abi.IrqEvery)
	for i := range uint64(3) {
		run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence | abi.FlagInterrupt, Fence: i + 1})
	}
	waitFor(t, "three interrupts counted", func() bool {
		return d.Registers().Load(abi.ChannelStatusPage(c)+abi.RegIrqCount) == 3
	})
	if tokens, causes, _ := takeInterrupts(d, line); tokens != 1 || causes != abi.IrqCauseFence {
		t.Errorf("three raises gave %d tokens, causes %#b; want 1 token, IrqCauseFence", tokens, causes)
	}
	run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpNop, Flags: abi.FlagFence | abi.FlagInterrupt, Fence: 4})
	waitFor(t, "a fourth interrupt", func() bool {
		select {
		case <-line:
			return true
		default:
			return false
		}
	})
}

// TestANewDriverTakesTheLineOver: connecting to the line again closes the
// earlier connection (whose driver's interrupt thread then ends), and the
// line closes when the device stops.
func TestANewDriverTakesTheLineOver(t *testing.T) {
	d := openTest(t, Config{})
	first := d.Interrupts()
	second := d.Interrupts()
	select {
	case _, ok := <-first:
		if ok {
			t.Error("the first line delivered a token after being taken over")
		}
	case <-time.After(time.Second):
		t.Fatal("the first line is still open after a second driver connected")
	}
	d.Close()
	for range second { // the Stopped token, then closed
	}
}
