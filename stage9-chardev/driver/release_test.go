package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestAReleaseIsDoneWhenTheDriverGivesBack: a free's Release is not done
// while the work queued before the free has yet to run, nor once it has
// run until a reclaim gives the thing back (giving back is lazy); after
// the reclaim it is — for device memory (Context.FreeRelease) and for a
// window entry (HostFreeRelease). The daemon refunds a client's quota by
// it (server/owed.go).
func TestAReleaseIsDoneWhenTheDriverGivesBack(t *testing.T) {
	const delay = 200_000_000 // cycles: 200 ms, to free and look in while the DELAY runs
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c := newContext(t, d)
	tests := []struct {
		name string
		free func() (*Release, error) // takes one thing and frees it
	}{
		{"memory", func() (*Release, error) {
			va, err := c.Alloc(4096, abi.Page4K)
			if err != nil {
				return nil, err
			}
			return c.FreeRelease(va)
		}},
		{"window entry", func() (*Release, error) {
			p, err := d.HostAlloc(4096)
			if err != nil {
				return nil, err
			}
			return d.HostFreeRelease(p)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := d.Now()
			// Context 0's channel: its commands may name anything, so a
			// free waits for them (queuedWorkOf, namers).
			p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: delay}})
			require.NoError(t, err)
			back, err := tt.free()
			require.NoError(t, err)
			require.NotNil(t, back, "the free's Release")
			d.Reclaim()
			done := back.Done()
			if d.Now()-start < delay { // the device's clock: the DELAY cannot have run yet
				assert.False(t, done, "the Release with the DELAY queued before the free still to run")
			}
			require.NoError(t, p.Wait())
			if !done {
				assert.False(t, back.Done(), "the Release once the DELAY has run, before a reclaim; want not done: only a reclaim gives back")
			}
			d.Reclaim()
			assert.True(t, back.Done(), "the Release after the DELAY ran and a reclaim")
		})
	}
}

// TestANilReleaseIsDone: a free that deferred nothing hands back nil,
// which is done.
func TestANilReleaseIsDone(t *testing.T) {
	var r *Release
	assert.True(t, r.Done(), "(*Release)(nil).Done()")
}
