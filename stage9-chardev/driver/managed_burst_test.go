package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// The tests of the fault handler's work by block (blocks.go) and of
// eviction (evict.go): a burst of records is one batch whose duplicates
// are served once, in one migration per block; the density prefetcher
// moves a dense block whole and a sparse one not; the clock spares a
// block an engine used and evicts one it did not, with one invalidation.

// TestAFaultBurstIsOneBatch: a COPY out of 1 MiB of managed memory,
// prefetch off, faults once as a burst: one batch of a record per 1 KiB
// (four per page), every page moved once, in one migration.
func TestAFaultBurstIsOneBatch(t *testing.T) {
	const size = 1 << 20
	const pages = size >> abi.PageShift
	d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 8 << 20}, Config{Prefetch: PrefetchOff})
	m := allocManaged(t, c, size)
	fillPattern(m.Bytes(), 21)
	dst, err := c.Alloc(size, abi.Page4K)
	require.NoError(t, err)
	before := d.ManagedStats()
	mustDo(t, cp, c, abi.Command{Op: abi.OpCopy, Src: m.VA(), Dst: dst, Size: size})
	s := d.ManagedStats()
	faults, batches := s.Faults-before.Faults, s.Batches-before.Batches
	if batches != 1 || faults != 4*pages {
		t.Errorf("%d records in %d batches; want %d in 1 (a burst: four records per page)", faults, batches, 4*pages)
	}
	assert.Equal(t, faults-pages, s.Duplicates-before.Duplicates, "Duplicates, every record but one per page")
	assert.Equal(t, uint64(pages), s.ToDevice-before.ToDevice, "ToDevice, each page once")
	assert.Equal(t, uint64(1), s.Migrations-before.Migrations, "Migrations; want 1: the pages are one block")
	got := make([]byte, size)
	for off := uint64(0); off < size; off += 4096 {
		copy(got[off:], readPA(d, paOf(t, c, dst+off), 4096))
	}
	checkBytes(t, "the copied MiB", got, m.Bytes())
}

// TestDensityPrefetch: with the density prefetcher, a fault moves the
// largest aligned run of pages around it of which more than 51 % are
// resident or faulting. A FILL over 300 of a block's 512 pages moves the
// whole block; one over 6 of the first 8 pages moves those 8; single
// pages far apart move alone.
func TestDensityPrefetch(t *testing.T) {
	tests := []struct {
		name  string
		fills [][2]int // [first page, pages] of each FILL, run one after another
		want  int      // pages resident after them
	}{
		{"dense block", [][2]int{{0, 300}}, 512},
		{"dense subtree", [][2]int{{0, 6}}, 8},
		{"half is not more than half", [][2]int{{0, 4}}, 4},
		{"sparse", [][2]int{{0, 1}, {100, 1}, {200, 1}, {300, 1}, {400, 1}}, 5},
		{"filling in", [][2]int{{0, 1}, {1, 1}, {2, 1}}, 4}, // the third makes [0, 4) 3/4 occupied
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 8 << 20}, Config{Prefetch: PrefetchDensity})
			m := allocManaged(t, c, blockPages<<abi.PageShift)
			want := bytes.Clone(m.Bytes())
			for _, f := range tt.fills {
				off, n := uint64(f[0])<<abi.PageShift, uint64(f[1])<<abi.PageShift
				mustDo(t, cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA() + off, Size: n, Value: 0x3c})
				copy(want[off:off+n], bytes.Repeat([]byte{0x3c}, int(n)))
			}
			if dev, _ := m.Resident(); dev != tt.want {
				t.Errorf("Resident() = %d; want %d (stats %+v)", dev, tt.want, d.ManagedStats())
			}
			mustSync(t, m)
			checkBytes(t, "the block after the FILLs", m.Bytes(), want)
		})
	}
}

// TestClockSparesAUsedBlock: two blocks on the device, the first moved
// first; an engine reads the first. FIFO evicts the first (it came
// first); the clock gives it a second chance — its accessed bits are set
// — and evicts the second, which no engine has touched. Either way the
// eviction is one TLB invalidation for the whole block.
func TestClockSparesAUsedBlock(t *testing.T) {
	for _, pol := range []Eviction{EvictFIFO, EvictClock} {
		t.Run(pol.String(), func(t *testing.T) {
			d, c, _, cm := managedSetup(t, device.Config{MemorySize: 8 << 20}, Config{Prefetch: PrefetchOff, Eviction: pol})
			const block = blockPages << abi.PageShift
			m := allocManaged(t, c, 2*block)
			for _, off := range []uint64{0, block} { // the first block first
				mg, err := m.Prefetch(off, block, ToDevice)
				require.NoError(t, err)
				require.NoError(t, mg.Wait())
			}
			sumAt, err := c.Alloc(4096, abi.Page4K)
			require.NoError(t, err)
			mustDo(t, cm, c, abi.Command{Op: abi.OpSum32, Src: m.VA(), Dst: sumAt, Size: block}) // uses the first block
			before := d.ManagedStats()
			d.um.mu.Lock()
			gen := d.regs.Load(abi.RegInvalGen)
			d.evict(nil, 0, 0, 1, true)
			invals := d.regs.Load(abi.RegInvalGen) - gen
			var res [2]int
			for i := range m.pages {
				if m.pages[i].where == pageDevice {
					res[i/blockPages]++
				}
			}
			d.um.mu.Unlock()
			s := d.ManagedStats()
			wantRes := [2]int{0, blockPages} // FIFO: the first block leaves
			if pol == EvictClock {
				wantRes = [2]int{blockPages, 0}
			}
			assert.Equal(t, wantRes, res, "after one eviction, pages resident per block")
			if invals != 1 || s.Evictions-before.Evictions != 1 || s.Evicted-before.Evicted != blockPages {
				t.Errorf("one eviction: %d invalidations, %d blocks, %d pages; want 1, 1, %d",
					invals, s.Evictions-before.Evictions, s.Evicted-before.Evicted, blockPages)
			}
		})
	}
}
