package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// TestAnAllocTakesBackWhatManagedPagesHold: managed pages are a cache of
// device memory, so an Alloc that finds the device full must take the
// memory back from them rather than fail — whether the pages are on the
// device (they go home) or have gone home already, leaving their frames
// idle in the frame pool (the chunks go back to the allocator). A
// managed allocation twice the device's size is moved to the device, or
// there and back; then an Alloc of a quarter of the device, in context 0
// and in the program's context, must succeed, and the managed bytes must
// be as they were.
func TestAnAllocTakesBackWhatManagedPagesHold(t *testing.T) {
	for _, where := range []string{"device", "pool"} {
		t.Run("pages="+where, func(t *testing.T) {
			d, c, _, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{})
			size := d.DataSize() * 2 &^ (2<<20 - 1)
			m := allocManaged(t, c, size)
			fillPattern(m.Bytes(), 7)
			want := bytes.Clone(m.Bytes())
			moves := []Location{ToDevice}
			if where == "pool" {
				moves = append(moves, ToHost)
			}
			for _, to := range moves {
				mg, err := m.Prefetch(0, size, to)
				require.NoError(t, err, "Prefetch(0, %d, %v)", size, to)
				require.NoError(t, mg.Wait(), "the prefetch to %v", to)
			}
			quarter := d.DataSize() / 4 &^ (64<<10 - 1)
			_, err := d.Alloc(quarter)
			require.NoError(t, err, "Alloc(%d) in context 0, the device's memory held by managed pages (%s)", quarter, where)
			_, err = c.Alloc(quarter, 0)
			require.NoError(t, err, "Alloc(%d) in the program's context, the device's memory held by managed pages (%s)", quarter, where)
			mustSync(t, m)
			require.True(t, bytes.Equal(want, m.Bytes()), "the managed allocation's bytes changed when its pages gave way to an Alloc")
		})
	}
}

// TestAnAllocEvictsOnlyWhatItNeeds: an Alloc that finds the device full
// of managed pages sends home what it needs, not every page: here one
// 64 KiB Alloc, for which one block — the eviction policy's unit, up to
// 2 MiB of pages — suffices. Two blocks' worth is allowed (yieldFrames
// doubles what it asks for, and the policy may pass over a block it
// then takes), not the whole device.
func TestAnAllocEvictsOnlyWhatItNeeds(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{})
	size := d.DataSize() * 2 &^ (2<<20 - 1)
	m := allocManaged(t, c, size)
	mg, err := m.Prefetch(0, size, ToDevice)
	require.NoError(t, err)
	require.NoError(t, mg.Wait())
	d.um.mu.Lock()
	d.releaseChunks() // the frame pool's idle chunks: taken below with the rest
	d.um.mu.Unlock()
	for { // the rest of the device, taken past yieldFrames: an Alloc now needs frames that hold pages
		if _, err := d.alloc.Alloc(64 << 10); err != nil {
			break
		}
	}
	before, _ := m.Resident()
	require.Greater(t, before, 2*blockPages, "pages on the device before the Alloc: more than two blocks, or the test shows nothing")
	_, err = d.Alloc(64 << 10)
	require.NoError(t, err, "Alloc(64 KiB) with the device full of managed pages")
	after, _ := m.Resident()
	t.Logf("pages on the device: %d before the Alloc, %d after", before, after)
	assert.GreaterOrEqual(t, after, before-2*blockPages, "pages still on the device after a 64 KiB Alloc (of %d before)", before)
}

// TestAnAllocThatCannotFitEvictsNothing: an Alloc larger than the free
// memory and every frame managed pages hold together fails — and sends no
// page home for it, since giving all of them back would not make it fit.
// Without the check, an Alloc that was bound to fail cost every managed
// page its place on the device, as often as it was asked.
func TestAnAllocThatCannotFitEvictsNothing(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{})
	m := allocManaged(t, c, 4<<20)
	mg, err := m.Prefetch(0, 4<<20, ToDevice)
	require.NoError(t, err)
	require.NoError(t, mg.Wait())
	before, _ := m.Resident()
	require.Equal(t, 1024, before, "pages on the device before the Alloc")
	_, err = d.Alloc(d.DataSize())
	require.ErrorIs(t, err, ErrOutOfMemory, "Alloc of all of device memory, with 4 MiB of it held by managed pages and more by the driver")
	after, _ := m.Resident()
	assert.Equal(t, before, after, "pages on the device after an Alloc that could not fit")
}

// TestAnAllocEndsWhileEnginesKeepTouchingEveryBlock: under the clock
// policy a block whose accessed bits are set gets a second chance, and
// yieldFrames steps until a step gives memory back, holding um.mu. If the
// engines set the bits again as fast as the hand clears them — a client
// whose kernels walk all their managed memory — no step moved anything,
// and the loop went on for as long as they did, every client's faults
// waiting on um.mu. Here the bits are set again at every second chance
// (Hooks.SecondChance), up to a limit the loop would reach only by going
// round and round; the Alloc must end well before it.
func TestAnAllocEndsWhileEnginesKeepTouchingEveryBlock(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{Eviction: EvictClock})
	size := d.DataSize() * 2 &^ (2<<20 - 1)
	m := allocManaged(t, c, size)
	mg, err := m.Prefetch(0, size, ToDevice)
	require.NoError(t, err)
	require.NoError(t, mg.Wait())
	d.um.mu.Lock()
	d.releaseChunks()
	blocks := d.um.resident.Len()
	d.um.mu.Unlock()
	for { // the rest of the device: an Alloc now needs frames that hold pages
		if _, err := d.alloc.Alloc(64 << 10); err != nil {
			break
		}
	}
	limit := 100 * blocks
	chances := 0
	touch := func() { // as the engines' walks do, all the time
		for i := range m.pages {
			if p := &m.pages[i]; p.where == pageDevice {
				setAccessed(d.vm.pool.mem, p.pte)
			}
		}
	}
	d.um.mu.Lock()
	touch()
	d.um.mu.Unlock()
	d.SetHooks(Hooks{SecondChance: func() { // um.mu is held
		if chances++; chances <= limit {
			touch()
		}
	}})
	before := d.ManagedStats()
	_, err = d.Alloc(64 << 10)
	require.NoError(t, err, "Alloc(64 KiB) with the device full of managed pages the engines keep touching")
	after := d.ManagedStats()
	t.Logf("%d blocks resident; %d second chances; evicted %d pages", blocks, chances, after.Evicted-before.Evicted)
	assert.Less(t, chances, limit/2, "second chances given before the Alloc ended (%d blocks resident)", blocks)
}

// setAccessed sets the accessed bit of the entry at pa, as an engine's
// walk does.
func setAccessed(mem []byte, pa uint64) {
	for {
		e := loadPTE(mem, pa)
		if casPTE(mem, pa, e, e|abi.PTEAccessed) {
			return
		}
	}
}
