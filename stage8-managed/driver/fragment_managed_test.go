package driver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// TestAManagedPageLeavesItsBlock: managed pages resident in consecutive
// frames are merged into a block by any recomputation of their window (a
// neighbour's map or unmap runs one); when one of them goes back to the
// host, the entries around it must stop naming a block that holds it, or
// an engine that walks a neighbour would reach the departed page's old
// frame through the neighbour's TLB entry. toHost recomputes the window
// before it invalidates (managed.go).
func TestAManagedPageLeavesItsBlock(t *testing.T) {
	d, c, cp, _ := managedSetup(t, device.Config{}, Config{ThrashThreshold: -1})
	m := allocManaged(t, c, 16<<abi.PageShift)
	require.NoError(t, do(cp, c, abi.Command{Op: abi.OpFill, Dst: m.VA(), Size: m.Size(), Value: 1}))
	d.refragment(c.root, m.VA(), m.Size()) // what a neighbour's map would do
	d.um.mu.Lock()
	before := fragmentsOf(d, c.root, m.VA())
	d.toHost(m, 9, 1, false)
	after := fragmentsOf(d, c.root, m.VA())
	d.um.mu.Unlock()
	if before[8] < 4 {
		t.Fatalf("16 resident pages in consecutive frames: page 8's fragment %d; want a 64 KiB block (4) at least — the setup did not merge them", before[8])
	}
	require.Equal(t, -1, after[9], "page 9 after toHost: fragment %d; want an invalid entry", after[9])
	for i, f := range after[:16] {
		if f <= 0 {
			continue
		}
		if first := i &^ (1<<f - 1); 9 >= first && 9 < first+1<<f {
			t.Errorf("page %d's fragment %d names a block of pages %d..%d, which holds page 9, gone to the host", i, f, first, first+1<<f-1)
		}
	}
}
