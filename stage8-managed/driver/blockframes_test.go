package driver

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// TestAWholeBlockIsOneTLBEntry: a 2 MiB block the fault handler moves
// whole lands in one aligned run of frames and is mapped as one fragment,
// so an engine reading all of it fills one TLB entry for it (counted by the
// device's own counters), not one per 4 KiB page; when one of its pages
// goes back to the host, the block splits — no entry's fragment reaches
// over the page — and the invalidation drops the engines' entry for the
// old block, so the next read faults the page back and sums what the host
// wrote there, not the frame it left.
func TestAWholeBlockIsOneTLBEntry(t *testing.T) {
	d, c, cp, cm := managedSetup(t, device.Config{MemorySize: 8 << 20}, Config{Prefetch: PrefetchDensity, ThrashThreshold: -1})
	// The compute engine sleeps when idle, and publishes its TLB counters
	// as it goes to sleep: its state register says when they are whole.
	require.NoError(t, d.SetIdle(abi.EngineCompute, Idle{Mode: IdleSleep}))
	m := allocManaged(t, c, blockPages<<abi.PageShift)
	require.Equal(t, uint64(0), m.VA()%(blockPages<<abi.PageShift), "a 2 MiB managed allocation at %#x; want it aligned to 2 MiB", m.VA())
	mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: m.Size(), Value: 7})
	if dev, _ := m.Resident(); dev != blockPages {
		t.Fatalf("after a FILL of the block: %d pages on the device; want %d", dev, blockPages)
	}
	d.um.mu.Lock()
	frags := fragmentsOf(d, c.root, m.VA())
	d.um.mu.Unlock()
	for i, f := range frags {
		require.Equal(t, abi.MaxFragment, f, "page %d of a block moved whole: fragment %d; want %d (2 MiB)", i, f, abi.MaxFragment)
	}
	sumAt, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	sumPA := paOf(t, c, sumAt)
	sum := func() (got uint64, misses uint64) {
		t.Helper()
		d.invalidate(c.ID(), 0, 0) // every entry of every engine: the count starts from an empty TLB
		before := asleepTLB(t, d).Misses
		mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: m.Size()})
		return binary.LittleEndian.Uint64(readPA(d, sumPA, 8)), asleepTLB(t, d).Misses - before
	}
	const words = blockPages << abi.PageShift / 4
	if got, misses := sum(); got != words*0x07070707 || misses != 2 {
		t.Fatalf("SUM32 of the block: %#x with %d TLB misses; want %#x with 2 (the block, the sum's page)", got, misses, uint64(words*0x07070707))
	}

	d.um.mu.Lock()
	d.toHost(m, 9, 1, false) // as an eviction of one page would
	after := fragmentsOf(d, c.root, m.VA())
	d.um.mu.Unlock()
	for i, f := range after {
		if f > 0 && i&^(1<<f-1) <= 9 && 9 < i&^(1<<f-1)+1<<f {
			t.Fatalf("after page 9 left: page %d's fragment %d still names a block holding page 9", i, f)
		}
	}
	host := m.Bytes()
	binary.LittleEndian.PutUint32(host[9<<abi.PageShift:], 0x07070707+1) // page 9 is the host's now
	faults := d.ManagedStats().Faults
	if got, _ := sum(); got != words*0x07070707+1 {
		t.Fatalf("SUM32 after page 9 went to the host and the host added 1 to it: %#x; want %#x — an engine read page 9's old frame through the old block's entry",
			got, uint64(words*0x07070707+1))
	}
	if d.ManagedStats().Faults == faults {
		t.Errorf("the SUM32 after page 9 left did not fault: it reached page 9 without it")
	}
}

// asleepTLB waits until the compute engine is asleep, so that it has
// published its TLB counters, and returns the engines' counts.
func asleepTLB(t *testing.T, d *Driver) TLBStats {
	t.Helper()
	state := abi.EngineStatusPage(abi.EngineCompute) + abi.RegEngineState
	for deadline := time.Now().Add(managedWait); d.regs.Load(state) != abi.EngineAsleep; {
		if time.Now().After(deadline) {
			t.Fatalf("the compute engine is not asleep after %v in sleep mode", managedWait)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return d.TLBStats()
}

// TestABlockTakesItsRunAgain: a block that goes to the host and comes back
// whole, again and again, takes its run of frames from the pool each time
// (poolRun), as one fragment, not fresh memory from the allocator: the
// pool does not grow.
func TestABlockTakesItsRunAgain(t *testing.T) {
	d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{Prefetch: PrefetchDensity, ThrashThreshold: -1})
	m := allocManaged(t, c, blockPages<<abi.PageShift)
	var chunks int
	for round := range 5 {
		mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: m.Size(), Value: uint64(round)})
		d.um.mu.Lock()
		frags, n := fragmentsOf(d, c.root, m.VA()), len(d.um.chunks)
		d.um.mu.Unlock()
		if frags[0] != abi.MaxFragment || frags[255] != abi.MaxFragment { // fragmentsOf reads the first 256 entries
			t.Fatalf("round %d: fragments %d..%d; want %d", round, frags[0], frags[255], abi.MaxFragment)
		}
		if round == 0 {
			chunks = n
		} else if n != chunks {
			t.Fatalf("round %d: the frame pool holds %d chunks; want %d, as after the first round", round, n, chunks)
		}
		mustSync(t, m)
	}
}
