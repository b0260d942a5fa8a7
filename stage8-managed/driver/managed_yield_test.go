package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
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
