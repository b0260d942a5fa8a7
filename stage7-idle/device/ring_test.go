package device

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"softgpu/stage7-idle/abi"
)

// slot returns the ring slot of engine e that holds index i.
func slot(d *Device, e abi.Engine, i uint64) []byte {
	mask := d.Registers().Load(abi.RegRingSize) - 1
	return d.Ring(e)[abi.SlotOffset(i, mask):][:abi.CommandSize]
}

// statusOf reads the status the engine published for index i. Call it only
// after RegHead has passed i.
func statusOf(d *Device, e abi.Engine, i uint64) abi.Status {
	mask := d.Registers().Load(abi.RegRingSize) - 1
	return abi.LoadStatus(d.RingStatus(e)[abi.StatusOffset(i, mask):])
}

// waitHead spins until engine e's RegHead reads want.
func waitHead(t *testing.T, d *Device, e abi.Engine, want uint64) {
	t.Helper()
	bank := abi.EngineRegs(e)
	deadline := time.Now().Add(10 * time.Second)
	for d.Registers().Load(bank+abi.RegHead) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%v engine: RegHead = %#x after 10 s; want %#x", e, d.Registers().Load(bank+abi.RegHead), want)
		}
		runtime.Gosched()
	}
}

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
		d, err := Open(Config{MemorySize: 1 << 16, RingSize: tt.size, RingStart: 1 << 40})
		if tt.want == 0 {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("Open(RingSize=%d) error = %v; want ErrConfig", tt.size, err)
			}
			if err == nil {
				d.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(RingSize=%d) = %v", tt.size, err)
			continue
		}
		regs := d.Registers()
		if got := regs.Load(abi.RegRingSize); got != tt.want {
			t.Errorf("RingSize=%d: RegRingSize = %d; want %d", tt.size, got, tt.want)
		}
		for e := range abi.Engine(abi.NumEngines) {
			bank := abi.EngineRegs(e)
			if h, tl := regs.Load(bank+abi.RegHead), regs.Load(bank+abi.RegDoorbell); h != 1<<40 || tl != 1<<40 {
				t.Errorf("%v engine: head, tail = %#x, %#x at reset; want RingStart %#x for both", e, h, tl, uint64(1<<40))
			}
			ring, status := d.Ring(e), d.RingStatus(e)
			if uint64(len(ring)) != tt.want*abi.CommandSize || uint64(len(status)) != tt.want*abi.StatusEntrySize {
				t.Errorf("%v engine: ring %d bytes, status %d bytes; want %d and %d", e, len(ring), len(status),
					tt.want*abi.CommandSize, tt.want*abi.StatusEntrySize)
			}
			if !cacheAligned(ring) {
				t.Errorf("%v engine: ring at %p is not cache-line aligned", e, &ring[0])
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
	cmds := []abi.Command{
		{Op: abi.OpFill, Dst: 0, Size: 64, Value: 1},
		{Op: abi.OpFill, Dst: 0, Size: 32, Value: 2}, // after the first: order shows in memory
		{Op: abi.OpFill, Dst: testMem, Size: 1},      // out of range
		{Op: abi.OpCopy, Src: 0, Dst: 64, Size: 64},  // sees both fills
		{Op: abi.OpNop},
	}
	want := []abi.Status{abi.StatusOK, abi.StatusOK, abi.StatusOutOfRange, abi.StatusOK, abi.StatusOK}
	for i, c := range cmds {
		c.Seq = uint64(i)
		c.Encode(slot(d, abi.EngineCopy, uint64(i)))
	}
	ringDoorbell(d, abi.EngineCopy, uint64(len(cmds)))
	waitHead(t, d, abi.EngineCopy, uint64(len(cmds)))
	for i := range cmds {
		if got := statusOf(d, abi.EngineCopy, uint64(i)); got != want[i] {
			t.Errorf("command %d (%v) = %v; want %v", i, cmds[i].Op, got, want[i])
		}
	}
	image := append(bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{1}, 32)...)
	if got := d.Memory()[:128]; !bytes.Equal(got, append(image, image...)) {
		t.Errorf("memory after the batch = % x; want % x twice", got, image)
	}
}

// TestEngineFollowsTheWrap starts the ring just below 2^64 and runs commands
// one at a time and in a batch that straddles the wrap. The engine compares
// indices only for equality, so nothing here may stall or skip.
func TestEngineFollowsTheWrap(t *testing.T) {
	const start = 1<<64 - 3
	d := openTest(t, Config{RingSize: 4, RingStart: start})
	for i := range 5 {
		if st := run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: 0, Size: 8, Value: uint64(i)}); st != abi.StatusOK {
			t.Fatalf("fill %d = %v; want ok", i, st)
		}
		if got := d.Memory()[0]; got != byte(i) {
			t.Fatalf("fill %d: memory holds %d", i, got)
		}
	}
	// Head is now start+5 = 2; a batch of four runs from 2 to 5 — and one
	// from 2^32-2 would be no different, the index is never narrowed.
	tail := uint64(start)
	tail += 5
	for i := range uint64(4) {
		c := abi.Command{Op: abi.OpFill, Dst: 64 * i, Size: 64, Value: 0x80 + i, Seq: tail + i}
		c.Encode(slot(d, abi.EngineCopy, tail+i))
	}
	ringDoorbell(d, abi.EngineCopy, tail+4)
	waitHead(t, d, abi.EngineCopy, tail+4)
	for i := range uint64(4) {
		if got := d.Memory()[64*i+63]; got != byte(0x80+i) {
			t.Errorf("batch command %d: memory holds %#x; want %#x", i, got, 0x80+i)
		}
	}
}

// TestCloseLeavesTheRestUnstarted queues a long DELAY and a fill behind it:
// Close cuts the delay short and the fill never runs.
func TestCloseLeavesTheRestUnstarted(t *testing.T) {
	d := openTest(t, Config{})
	cmds := []abi.Command{{Op: abi.OpDelay, Value: 1 << 62}, {Op: abi.OpFill, Dst: 0, Size: 64, Value: 7, Seq: 1}}
	for i, c := range cmds {
		c.Encode(slot(d, abi.EngineCompute, uint64(i)))
	}
	ringDoorbell(d, abi.EngineCompute, 2)
	time.Sleep(5 * time.Millisecond) // let the delay start; the checks hold either way
	d.Close()
	if head := d.Registers().Load(abi.EngineRegs(abi.EngineCompute) + abi.RegHead); head > 1 {
		t.Errorf("RegHead after Close = %d; want at most 1 (the fill behind the delay not started)", head)
	}
	if d.Memory()[0] == 7 {
		t.Errorf("the fill queued behind the aborted delay ran")
	}
}
