//go:build exercise

package device

// The checker of exercise 6.1, "Another priority" (book/stage6-runlist.md):
//
//	go test -tags exercise -run Exercise6_1 ./device
//
// The exercise adds a fifth level, above the realtime one, which becomes
// abi.MaxPriority, and which never ages out and is never preempted by
// aging. This test is the starvation half of
// TestEqualChannelsShareTheEngine with the two streams at the new level:
// there a low-priority fill completes while the streams still run (it
// ages past them); here it must wait until both have finished. That is
// the exception to the starvation guarantee, made a test. The order is
// the engine's own, so no time is asserted; the streams last tens of
// milliseconds of device time, far past starveLimit.

import (
	"testing"

	"softgpu/stage6-runlist/abi"
)

func TestExercise6_1(t *testing.T) {
	const realtime = 3 // the highest level before the exercise
	if abi.MaxPriority <= realtime {
		t.Fatalf("abi.MaxPriority = %d: add a fifth level above the realtime one (%d) and make it the new MaxPriority", abi.MaxPriority, realtime)
	}
	top := uint8(abi.MaxPriority)
	d := openTest(t, Config{MemorySize: 16 << 20})
	const e = abi.EngineCopy
	const low = abi.Channel(30)
	hi := []abi.Channel{31, 32}
	if got := submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, hi[0], top, 20_000), rlEntry(d, hi[1], top, 20_000),
		rlEntry(d, low, abi.PriorityLow, 0)}); got != abi.RunlistOK {
		t.Fatalf("a runlist with two channels at priority %d: %v", top, got)
	}
	var last [2]uint64
	for k, c := range hi {
		cmds := make([]abi.Command, 200)
		for n := range cmds {
			cmds[n] = abi.Command{Op: abi.OpDelay, Value: 150_000} // 150 µs each: 30 ms per channel
		}
		last[k] = publish(d, c, cmds...) + 199
	}
	i := publish(d, low, abi.Command{Op: abi.OpFill, Dst: 0, Size: 64, Value: 1})
	if st := await(t, d, low, i); st != abi.StatusOK {
		t.Fatalf("the low-priority fill: %v", st)
	}
	if !completed(d, hi[0], last[0]) || !completed(d, hi[1], last[1]) {
		t.Errorf("the low-priority fill completed while channels at priority %d still had work: it aged past them, but the new level must never be preempted by aging", top)
	}
}
