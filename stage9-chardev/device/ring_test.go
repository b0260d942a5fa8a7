package device

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
)

func TestRingConfig(t *testing.T) {
	tests := []struct {
		size, want uint64 // want 0: Open must fail with ErrConfig
	}{
		{0, DefaultRingSize},
		{1, 1},
		{4, 4},
		{MaxRingSize, MaxRingSize},
		{3, 0},
		{6, 0},
		{MaxRingSize * 2, 0},
		{1<<64 - 1, 0},
	}
	for _, tt := range tests {
		const start = 1 << 40
		d, err := Open(Config{MemorySize: 1 << 16, RingSize: tt.size, Start: start})
		if tt.want == 0 {
			assert.ErrorIs(t, err, ErrConfig, "Open(RingSize=%d) error", tt.size)
			if err == nil {
				d.Close()
			}
			continue
		}
		if !assert.NoError(t, err, "Open(RingSize=%d)", tt.size) {
			continue
		}
		regs := d.Registers()
		assert.Equal(t, tt.want, regs.Load(abi.RegRingSize), "RingSize=%d: RegRingSize", tt.size)
		for c := range abi.Channel(abi.NumChannels) {
			if tl := regs.Load(abi.DoorbellPage(c) + abi.RegDoorbell); tl != start {
				t.Errorf("%v: tail = %#x at reset; want Start %#x", c, tl, uint64(start))
			}
			if e := entry(d, c, start-1); !abi.Completed(e, start-1) {
				t.Errorf("%v: index Start-1 does not read as completed at reset (entry %#x)", c, e)
			}
			if e := entry(d, c, start); abi.Completed(e, start) {
				t.Errorf("%v: index Start reads as completed at reset (entry %#x)", c, e)
			}
			ring, cq := d.Ring(c), d.Completions(c)
			if uint64(len(ring)) != tt.want*abi.CommandSize || uint64(len(cq)) != tt.want*abi.CompletionWords {
				t.Errorf("%v: ring %d bytes, completions %d words; want %d and %d", c, len(ring), len(cq),
					tt.want*abi.CommandSize, tt.want*abi.CompletionWords)
			}
		}
		d.Close()
	}
}

// TestEngineRunsEverythingUpToTheTail places several commands, rings the
// doorbell once, and checks that the engine ran all of them in order, each
// with its own status — a bad one in the middle fails alone.
func TestEngineRunsEverythingUpToTheTail(t *testing.T) {
	d := openTest(t, Config{RingSize: 8})
	c := abi.DefaultChannel(abi.EngineCopy)
	cmds := []abi.Command{
		{Op: abi.OpFill, Dst: 0, Size: 64, Value: 1},
		{Op: abi.OpFill, Dst: 0, Size: 32, Value: 2}, // after the first: order shows in memory
		{Op: abi.OpFill, Dst: testMem, Size: 1},      // out of range
		{Op: abi.OpCopy, Src: 0, Dst: 64, Size: 64},  // sees both fills
		{Op: abi.OpNop},
	}
	want := []abi.Status{abi.StatusOK, abi.StatusOK, abi.StatusOutOfRange, abi.StatusOK, abi.StatusOK}
	for i, cmd := range cmds {
		cmd.Seq = uint64(i)
		cmd.Encode(slot(d, c, uint64(i)))
	}
	ringDoorbell(d, c, uint64(len(cmds)))
	waitCompleted(t, d, c, uint64(len(cmds)-1))
	for i := range cmds {
		assert.Equal(t, want[i], statusOf(d, c, uint64(i)), "command %d (%v)", i, cmds[i].Op)
	}
	image := append(bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{1}, 32)...)
	assert.Equal(t, append(image, image...), data(d)[:128], "memory after the batch; want % x twice", image)
}

// TestEngineFollowsTheWrap starts the ring just below 2^64 and runs commands
// one at a time and in a batch that straddles the wrap. The engine compares
// indices only for equality and their difference, so nothing here may
// stall, skip, or fault.
func TestEngineFollowsTheWrap(t *testing.T) {
	const start = 1<<64 - 3
	d := openTest(t, Config{RingSize: 4, Start: start})
	c := abi.DefaultChannel(abi.EngineCopy)
	for i := range 5 {
		require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 8, Value: uint64(i)}), "fill %d", i)
		if got := data(d)[0]; got != byte(i) {
			t.Fatalf("fill %d: memory holds %d", i, got)
		}
	}
	// The head is now start+5 = 2; a batch of four runs from 2 to 5.
	tail := uint64(start)
	tail += 5
	for i := range uint64(4) {
		cmd := abi.Command{Op: abi.OpFill, Dst: 64 * i, Size: 64, Value: 0x80 + i, Seq: tail + i}
		cmd.Encode(slot(d, c, tail+i))
	}
	ringDoorbell(d, c, tail+4)
	waitCompleted(t, d, c, tail+3)
	for i := range uint64(4) {
		if got := data(d)[64*i+63]; got != byte(0x80+i) {
			t.Errorf("batch command %d: memory holds %#x; want %#x", i, got, 0x80+i)
		}
	}
}

// TestEachCompletionHoldsItsOwnStatus runs, on a ring of two entries,
// commands whose statuses change and repeat from lap to lap: the engine
// skips the status store when the entry already holds the value, so an
// entry must never show the status of the command a lap before.
func TestEachCompletionHoldsItsOwnStatus(t *testing.T) {
	d := openTest(t, Config{RingSize: 2})
	good := abi.Command{Op: abi.OpFill, Dst: 0, Size: 8, Value: 1}
	bad := abi.Command{Op: 0x7e} // no such opcode
	for i, ok := range []bool{true, false, false, true, true, true, false, false, false, true, false, true} {
		cmd, want := good, abi.StatusOK
		if !ok {
			cmd, want = bad, abi.StatusBadOpcode
		}
		require.Equal(t, want, run(t, d, abi.EngineCopy, cmd), "command %d (entry %d)", i, i%2)
	}
}

// TestCloseLeavesTheRestUnstarted queues a long DELAY and a fill behind it:
// Close cuts the delay short and the fill never runs.
func TestCloseLeavesTheRestUnstarted(t *testing.T) {
	d := openTest(t, Config{})
	c := abi.DefaultChannel(abi.EngineCompute)
	cmds := []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}, {Op: abi.OpFill, Dst: 0, Size: 64, Value: 7, Seq: 1}}
	for i, cmd := range cmds {
		cmd.Encode(slot(d, c, uint64(i)))
	}
	ringDoorbell(d, c, 2)
	time.Sleep(5 * time.Millisecond) // let the delay start; the checks hold either way
	mem := data(d)[0]
	completedFill := abi.Completed(entry(d, c, 1), 1)
	d.stop()
	if abi.Completed(entry(d, c, 1), 1) || completedFill {
		t.Errorf("the fill queued behind the aborted delay completed")
	}
	if got := data(d)[0]; got == 7 || mem == 7 {
		t.Errorf("the fill queued behind the aborted delay ran")
	}
}

// TestRingOfNoChannelIsNil: Ring and Completions with a channel the device
// does not have return nil, not a panic.
func TestRingOfNoChannelIsNil(t *testing.T) {
	d := openTest(t, Config{})
	for _, c := range []abi.Channel{abi.NumChannels, 1<<16 - 1} {
		if d.Ring(c) != nil || d.Completions(c) != nil {
			t.Errorf("Ring(%d), Completions(%d) = %d bytes, %d words; want nil", c, c, len(d.Ring(c)), len(d.Completions(c)))
		}
	}
}
