package driver

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage6-runlist/abi"
	"softgpu/stage6-runlist/device"
)

// TestUnmapKeepsATableWhoseLastSlotIsInUse: unmapping one mapping unlinks
// only tables left with no valid entry. Here the mapping left in the leaf
// table is in its last slot (511): the table must stay, and that page must
// still translate. (Mutation S5-20: unlinkEmptyBelow looks at every slot
// but the last.)
func TestUnmapKeepsATableWhoseLastSlotIsInUse(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c, err := d.NewContext()
	require.NoError(t, err)
	x, err := c.Alloc(2<<20-4096, abi.Page4K) // slots 0..510 of the leaf table for [2 MiB, 4 MiB)
	require.NoError(t, err)
	y, err := c.Alloc(4096, abi.Page4K) // slot 511, if the VAs are handed out in order
	require.NoError(t, err)
	require.Equal(t, uint64(userVABase), x, "x's VA")
	require.Equal(t, uint64(2*userVABase-4096), y, "y's VA: the last slot of x's leaf table")
	require.NoError(t, c.Unmap(x))
	require.NoError(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: y, Size: 8, Value: 0x77}), "FILL at y after x was unmapped")
	require.Equal(t, byte(0x77), d.hw.Memory()[paOf(t, c, y)])
}

// TestNoTranslationOutlivesUnmap: Unmap clears the entries, then
// invalidates, so no engine can hold a translation of the range once it
// returns — not even an engine that was walking the range while Unmap ran.
// Here a 4 MiB COPY (four runs, a safe point between each) reads the
// mapping while it is unmapped; afterwards a FILL at its VA must fault.
// Had Unmap invalidated before clearing, the engine could acknowledge, walk
// the still-valid entries for its next run, and keep that translation;
// the FILL would then write memory the context no longer owns. The window
// is a race, so the test makes several attempts. (Mutation S5-13.)
func TestNoTranslationOutlivesUnmap(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 64 << 20}, Config{})
	for attempt := range 20 {
		c, err := d.NewContext()
		require.NoError(t, err)
		const size = 4 << 20
		src, err := c.Alloc(size, abi.Page2M)
		require.NoError(t, err)
		dst, err := c.Alloc(size, abi.Page2M)
		require.NoError(t, err)
		srcPA, dstPA := paOf(t, c, src), paOf(t, c, dst)
		mem := d.hw.Memory()
		mem[srcPA] = 1
		mem[dstPA] = 0
		p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpCopy, Ctx: c.ID(), Src: src, Dst: dst, Size: size}})
		require.NoError(t, err)
		for deadline := time.Now().Add(time.Second); mem[dstPA] == 0 && time.Now().Before(deadline); { // the COPY has started
			runtime.Gosched()
		}
		require.NoError(t, c.Unmap(src))
		p.Wait()
		c.ClearFault()
		err = in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: src + size - 4096, Size: 8, Value: 0xee})
		require.Error(t, err, "attempt %d: a FILL at a VA unmapped before it was submitted succeeded: a translation outlived Unmap", attempt)
		require.NoError(t, c.Close())
	}
}
