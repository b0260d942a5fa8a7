package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestAnInvalidationIsReadWithItsOwnRange drives, through the driver's
// own invalidate, the interleavings behind TestManagedStress's once-seen
// SUM32 mismatch (issue 33), with invalidate held between a request's range
// registers and its generation store (Hooks.Invalidating). Each round
// moves page x of a context between two frames by storing its leaf entry,
// the way a migration does, invalidates x, and has the engine write x:
// the bytes must land in the frame the entry names, none in the other.
//
//	asleep  the engine sleeps through request N (for x, which it has
//	        cached) and wakes inside request N+1's window (for y): it finds
//	        the generation at N, one past what it last answered, while the
//	        registers already name y. Taking them for N's, it would drop y
//	        and keep x; it must drop everything (device/mmu.go,
//	        answerInval). The hook wakes it by a command it submits and
//	        waits for, so the interleaving is built, not timed.
//	awake   the engine spins, answering at every poll, while the hook
//	        pauses 200 µs inside request N for x, after request N-1 for y.
//	        The generation is stored after the range (driver/vm.go), so the
//	        engine cannot answer N during the pause; if the order were the
//	        other way round it would answer N with y's range, which the
//	        registers still hold, and keep x. A loaded machine can keep the
//	        engine off a CPU through the pause and hide such a bug in a
//	        round, never fail a correct driver; the rounds are many.
//
// A sleeping round counts only if the engine really slept through request
// N (it had not acknowledged it); a stale wake-up token can rob a round of
// that, so the test asks for most rounds, not all.
func TestAnInvalidationIsReadWithItsOwnRange(t *testing.T) {
	for _, mode := range []struct {
		name string
		idle IdleMode
	}{{"asleep", IdleSleep}, {"awake", IdleSpin}} {
		t.Run(mode.name, func(t *testing.T) { invalidationRounds(t, mode.idle) })
	}
}

// invalidationRounds is TestAnInvalidationIsReadWithItsOwnRange with the
// compute engine in idle mode idle.
func invalidationRounds(t *testing.T, idle IdleMode) {
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	d, c, _, cm := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{})
	require.NoError(t, d.SetIdle(abi.EngineCompute, Idle{Mode: idle}))
	x, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	y, err := c.Alloc(4096, abi.Page4K) // its frame is x's second home; its VA the other request's range
	require.NoError(t, err)
	frames := [2]uint64{paOf(t, c, x), paOf(t, c, y)}
	pte, err := d.leafEntry(c.root, x, &c.tables)
	require.NoError(t, err)
	original := loadPTE(d.vm.pool.mem, pte)
	t.Cleanup(func() { // x's entry back to its own frame before Close frees both
		storePTE(d.vm.pool.mem, pte, original)
		d.invalidate(c.ID(), x, 4096)
	})

	var inside func() // set for one invalidate at a time; only this goroutine calls invalidate
	d.SetHooks(Hooks{Invalidating: func() {
		if inside != nil {
			inside()
		}
	}})
	pause := func() {
		for start := time.Now(); time.Since(start) < 200*time.Microsecond; { // spin: a sleep would be 50 µs or more of timer slack
		}
	}
	state := abi.EngineStatusPage(abi.EngineCompute) + abi.RegEngineState
	ack := abi.EngineStatusPage(abi.EngineCompute) + abi.RegInvalAck
	exposed := 0
	for r := range rounds {
		old, now := frames[r%2], frames[(r+1)%2]
		v := byte(r + 1)
		mustDo(t, cm, c, abi.Command{Op: abi.OpFill, Dst: x, Size: 4096, Value: uint64(v - 1)}) // caches x → old
		var fillErr error
		fill := func() { fillErr = do(cm, c, abi.Command{Op: abi.OpFill, Dst: x, Size: 4096, Value: uint64(v)}) }
		if idle == IdleSleep {
			for deadline := time.Now().Add(managedWait); d.regs.Load(state) != abi.EngineAsleep; {
				if time.Now().After(deadline) {
					t.Fatalf("round %d: the compute engine is not asleep after %v in sleep mode", r, managedWait)
				}
				time.Sleep(50 * time.Microsecond)
			}
			// Request N: x moves. The engine is asleep, so invalidate
			// does not wait for it.
			storePTE(d.vm.pool.mem, pte, abi.MakePage(now, abi.PTEPage4K, true, false))
			d.invalidate(c.ID(), x, 4096)
			if d.regs.Load(ack) != d.vm.invalGen {
				exposed++
			}
			// Request N+1, for y: the engine wakes to write x while y's
			// range is in the registers and N is still the generation.
			inside = fill
			d.invalidate(c.ID(), y, 4096)
			inside = nil
		} else {
			d.invalidate(c.ID(), y, 4096) // request N-1: y's range in the registers
			storePTE(d.vm.pool.mem, pte, abi.MakePage(now, abi.PTEPage4K, true, false))
			inside = pause
			d.invalidate(c.ID(), x, 4096) // request N: x moves
			inside = nil
			exposed++
			fill()
		}
		require.NoError(t, fillErr, "round %d: FILL of x", r)
		if got := readPA(d, now, 4096); got[0] != v || got[4095] != v {
			t.Fatalf("round %d: x's frame %#x holds %#x..%#x after a FILL of %#x; its old frame %#x holds %#x: "+
				"the engine kept the entry of x that the invalidation named",
				r, now, got[0], got[4095], v, old, readPA(d, old, 1)[0])
		}
		if got := readPA(d, old, 1)[0]; got == v {
			t.Fatalf("round %d: x's old frame %#x was written (%#x) after x moved", r, old, got)
		}
	}
	if exposed < rounds/2 {
		t.Fatalf("the engine slept through %d of %d requests; want most: the test did not build its interleaving", exposed, rounds)
	}
	t.Logf("%d rounds, %d with the interleaving built", rounds, exposed)
}
