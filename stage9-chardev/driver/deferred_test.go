package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestFreedMemoryWaitsForQueuedWork: a COPY queued behind a DELAY, then a
// Free of its destination, then an Alloc of the same size, whose new owner
// writes its bytes — then the COPY runs. It must not land in the new
// allocation: the freed memory (and, in a context, the VA) is not handed
// out again until the work queued before the free has run. In a user
// context the COPY faults (its destination is unmapped); in context 0 it
// writes memory no one owns.
func TestFreedMemoryWaitsForQueuedWork(t *testing.T) {
	const size = 4096
	const delay = 50_000_000 // cycles: 50 ms, to free and allocate in while the COPY waits
	tests := []struct {
		name string
		user bool // a user context's Free, else context 0's (GPU.Free)
	}{{"context", true}, {"default", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
			c := d.DefaultContext()
			if tt.user {
				c = newContext(t, d)
			}
			mem := d.hw.Memory()
			pa := func(va uint64) uint64 {
				if tt.user {
					return paOf(t, c, va)
				}
				return va // context 0 maps device memory at its own address
			}
			for attempt := 0; ; attempt++ {
				src, err := c.Alloc(size, abi.Page4K)
				require.NoError(t, err)
				dst, err := c.Alloc(size, abi.Page4K)
				require.NoError(t, err)
				fillBytes(mem[pa(src):pa(src)+size], 0x11)
				start := d.Now()
				p, err := d.SubmitBatch(abi.EngineCopy, []abi.Command{
					{Op: abi.OpDelay, Ctx: c.ID(), Value: delay},
					{Op: abi.OpCopy, Ctx: c.ID(), Src: src, Dst: dst, Size: size},
				})
				require.NoError(t, err)
				require.NoError(t, c.Free(dst), "Free(%#x)", dst)
				next, err := c.Alloc(size, abi.Page4K)
				require.NoError(t, err)
				fillBytes(mem[pa(next):pa(next)+size], 0x22) // the next owner's bytes
				inTime := d.Now()-start < delay              // the device's clock: the COPY cannot have run yet
				p.Wait()                                     // a fault in a user context; nothing to report in context 0
				if tt.user {
					c.ClearFault()
				}
				if !inTime {
					if attempt < 5 {
						continue // too slow to free and allocate within the DELAY (a loaded machine): again
					}
					t.Skip("could not free and allocate within a 50 ms DELAY in 6 attempts")
				}
				if got := mem[pa(next) : pa(next)+size]; !bytes.Equal(got, bytes.Repeat([]byte{0x22}, size)) {
					t.Fatalf("the allocation after the Free (VA %#x, freed %#x) holds %#x...; want the new owner's 0x22: a COPY queued before the Free landed in it",
						next, dst, got[:8])
				}
				return
			}
		})
	}
}

// TestFreedVAsComeBackLast: a context's VAs are handed out next-fit, so a
// freed VA is not the next one handed out, and a stale pointer faults
// instead of reaching the next allocation.
func TestFreedVAsComeBackLast(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c := newContext(t, d)
	first, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	require.NoError(t, c.Free(first))
	next, err := c.Alloc(4096, abi.Page4K)
	require.NoError(t, err)
	if next == first {
		t.Fatalf("Alloc after Free(%#x) = %#x; want another VA (a freed VA comes back last)", first, next)
	}
	assert.Error(t, in(d, c, abi.EngineCopy, abi.Command{Op: abi.OpFill, Dst: first, Size: 8, Value: 1}), "a FILL through the freed VA %#x succeeded; want a fault", first)
}

// TestPageTablesComeBack: 244 cycles of alloc 4 KiB / free / alloc 2 MiB /
// free in one context leave the page-table pool as they found it — the
// 2 MiB page never overwrites the entry of the 4 KiB page's leaf table,
// and the tables an unmap empties go back — and after the context closes,
// every other context can still be made.
func TestPageTablesComeBack(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	c, err := d.NewContext()
	require.NoError(t, err)
	before := d.vm.pool.alloc.InUse()
	for i := range 244 {
		for _, page := range []abi.PageSize{abi.Page4K, abi.Page2M} {
			va, err := c.Alloc(uint64(page), page)
			require.NoError(t, err, "cycle %d: Alloc(%d)", i, uint64(page))
			require.NoError(t, c.Free(va), "cycle %d: Free(%#x)", i, va)
		}
	}
	if after := d.vm.pool.alloc.InUse(); after != before {
		t.Errorf("page-table pool in use: %d bytes before the cycles, %d after; want the same", before, after)
	}
	c.Close()
	var cs []*Context
	for {
		c, err := d.NewContext()
		if err != nil {
			break
		}
		cs = append(cs, c)
	}
	assert.Equal(t, abi.MaxContexts-1, len(cs), "made %d contexts after the cycles", len(cs))
	for _, c := range cs {
		c.Close()
	}
}
