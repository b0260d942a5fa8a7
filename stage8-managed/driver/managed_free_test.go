package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// TestManagedFreeWaitsForQueuedWork is TestFreedMemoryWaitsForQueuedWork
// for managed memory: a COPY into a managed allocation queued behind a
// DELAY, then Managed.Free, then AllocManaged of the same size, whose new
// owner writes its bytes — then the COPY runs. It must not land in the new
// allocation: the freed addresses are not handed out again until the work
// queued before the Free has run, so the COPY faults on its unmapped
// destination instead of migrating the new allocation's page and writing
// it.
func TestManagedFreeWaitsForQueuedWork(t *testing.T) {
	const size = 4096
	const delay = 50_000_000 // cycles: 50 ms, to free and allocate in while the COPY waits
	d, c, cp, _ := managedSetup(t, device.Config{MemorySize: 16 << 20}, Config{})
	mem := d.hw.Memory()
	for attempt := 0; ; attempt++ {
		src, err := c.Alloc(size, abi.Page4K)
		require.NoError(t, err)
		fillBytes(mem[paOf(t, c, src):paOf(t, c, src)+size], 0x11)
		m := allocManaged(t, c, size)
		start := d.Now()
		p, err := cp.SubmitBatch([]abi.Command{
			{Op: abi.OpDelay, Ctx: c.ID(), Value: delay},
			{Op: abi.OpCopy, Ctx: c.ID(), Src: src, Dst: m.VA(), Size: size},
		})
		require.NoError(t, err)
		require.NoError(t, m.Free())
		next := allocManaged(t, c, size)
		fillBytes(next.Bytes(), 0x22)   // the next owner's bytes
		inTime := d.Now()-start < delay // the device's clock: the COPY cannot have run yet
		p.Wait()                        // a fault: its destination is unmapped
		c.ClearFault()
		mustSync(t, next)
		if !inTime {
			if attempt < 5 {
				continue // too slow to free and allocate within the DELAY (a loaded machine): again
			}
			t.Skip("could not free and allocate within a 50 ms DELAY in 6 attempts")
		}
		if got := next.Bytes(); !bytes.Equal(got, bytes.Repeat([]byte{0x22}, size)) {
			t.Fatalf("the managed allocation after the Free (VA %#x, freed %#x) holds %#x...; want the new owner's 0x22: a COPY queued before the Free landed in it",
				next.VA(), m.VA(), got[:8])
		}
		return
	}
}

// TestAllocManagedTakesBackFreedAddresses: a program that uses managed
// memory alone gets the addresses it freed back — AllocManaged reclaims
// what has passed, as Alloc does — instead of holding every freed range
// until some other call happens to reclaim it.
func TestAllocManagedTakesBackFreedAddresses(t *testing.T) {
	d, c, _, _ := managedSetup(t, device.Config{MemorySize: 4 << 20}, Config{})
	for range 3 {
		m := allocManaged(t, c, 4096)
		require.NoError(t, m.Free())
	}
	allocManaged(t, c, 4096) // nothing was queued: every free above has passed
	d.vm.freeMu.Lock()
	held := len(d.vm.deferred)
	d.vm.freeMu.Unlock()
	assert.Equal(t, 0, held, "after AllocManaged, %d freed managed ranges are still held back; want 0: nothing queued names them", held)
}
