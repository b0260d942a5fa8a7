//go:build exercise

package driver

// The checker of exercise 8.1, "Another eviction policy"
// (book/stage8-managed.md):
//
//	go test -tags exercise -run Exercise8_1 ./driver
//
// The exercise adds a third policy after EvictClock and EvictFIFO,
// Eviction(2), whose String is "aging": every block on the device keeps
// an age, zero when it arrives; each time the handler must evict, every
// resident block's age is shifted right one bit and its top bit set if
// an engine used the block since the last time (an accessed bit), and the
// block of the lowest age leaves — of equal ages, the one that came
// first. This file names the policy by its number, so that it compiles
// before the constant exists.
//
// It drives d.evict directly, as TestClockSparesAUsedBlock does, through
// two evictions whose choices the three policies make differently. Blocks
// 0, 1, 2 move to the device in that order; an engine uses 0 and 2; one
// block is evicted (1, by clock and aging alike: the clock's hand passes
// 0, clearing its bit, and stops at 1). Block 3 comes; nothing is used;
// one block is evicted. The clock's hand is at 2, whose bit it never
// cleared, so it passes 2 and evicts 0; FIFO evicts 0, the first to come.
// Aging evicts 3: 0 and 2 have a bit of use in their history, 3 has none.

import (
	"testing"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

func TestExercise8_1(t *testing.T) {
	aging := Eviction(2)
	if !aging.Defined() || aging.String() != "aging" {
		t.Fatalf("Eviction(2) is %q, defined %v: add a third policy, EvictAging, whose String is \"aging\"", aging.String(), aging.Defined())
	}
	d, c, _, cm := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{Prefetch: PrefetchOff, Eviction: aging})
	const block = blockPages << abi.PageShift
	m := allocManaged(t, c, 4*block)
	prefetch := func(b uint64) {
		t.Helper()
		mg, err := m.Prefetch(b*block, block, ToDevice)
		if err != nil {
			t.Fatal(err)
		}
		if err := mg.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	sumAt, err := c.Alloc(4096, abi.Page4K)
	if err != nil {
		t.Fatal(err)
	}
	use := func(b uint64) {
		t.Helper()
		mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA() + b*block, Dst: sumAt, Size: block})
	}
	resident := func() [4]int {
		var res [4]int
		for i := range m.pages {
			if m.pages[i].where == pageDevice {
				res[i/blockPages]++
			}
		}
		return res
	}
	evictOne := func() [4]int {
		d.um.mu.Lock()
		defer d.um.mu.Unlock()
		d.evict(nil, 0, 0, 1, true)
		return resident()
	}
	for b := range uint64(3) {
		prefetch(b)
	}
	use(0)
	use(2)
	if got, want := evictOne(), [4]int{blockPages, 0, blockPages, 0}; got != want {
		t.Fatalf("the first eviction (blocks 0 and 2 used, 1 not) left pages resident per block %v; want %v: block 1, never used, leaves", got, want)
	}
	prefetch(3)
	if got, want := evictOne(), [4]int{blockPages, 0, blockPages, 0}; got != want {
		t.Errorf("the second eviction (nothing used since; 0 and 2 were used before, 3 never) left pages resident per block %v; want %v: block 3, with no use in its history, leaves (the clock and FIFO evict block 0)", got, want)
	}
}
