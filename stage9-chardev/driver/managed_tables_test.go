package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/device"
)

// TestAFailedAllocManagedGivesBackItsTables: an AllocManaged that runs the
// page-table pool out partway leaves no table of its own behind. The
// leaf tables it made before the pool ran out are unlinked and freed, as
// a failed Alloc's are (mapAt): left linked, they stay out of the pool,
// empty, for as long as the context lives, and every other context is the
// poorer.
func TestAFailedAllocManagedGivesBackItsTables(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 2 << 20}, Config{}) // a pool of 128 KiB: 32 pages
	c, err := d.NewContext()
	require.NoError(t, err)
	before := d.vm.pool.alloc.InUse()
	_, err = c.AllocManaged(128 << 20) // a leaf table per 2 MiB: 64 of them
	require.ErrorContains(t, err, "page-table memory", "AllocManaged of more than the pool can map")
	assert.Equal(t, before, d.vm.pool.alloc.InUse(), "bytes of the table pool in use, before and after the failed AllocManaged")
	m, err := c.AllocManaged(1 << 20)
	require.NoError(t, err, "a small AllocManaged after the failed one")
	require.NoError(t, m.Free())
}
