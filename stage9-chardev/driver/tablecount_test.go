package driver

import (
	"testing"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestTablePagesFollowsTheTables: a context's count of table pages starts
// at its root's, rises with every table a sparse map makes — the stage 9
// daemon's quota charges by it — and falls back to the root's as the
// frees unlink them. Frees defer the VA and the memory (deferred.go), not
// the tables: the count falls as each Free returns, and the pool gets the
// pages back.
func TestTablePagesFollowsTheTables(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 16 << 20}, Config{})
	poolFree := d.TablePoolFree()
	c := newContext(t, d)
	root := tablePages(abi.RootBytes)
	require.Equal(t, root, c.TablePages(), "TablePages of a new context; want its root's")
	require.Equal(t, poolFree-root, d.TablePoolFree(), "TablePoolFree beside a new context")

	// Each kept 4 KiB page lands in a 2 MiB region of its own, past the
	// 2 MiB allocation that followed it: one leaf table each.
	const kept = 8
	var vas []uint64
	for i := range kept {
		before := c.TablePages()
		va, err := c.Alloc(4096, abi.Page4K)
		require.NoError(t, err, "Alloc %d of 4 KiB", i)
		vas = append(vas, va)
		require.Greater(t, c.TablePages(), before, "TablePages after the sparse Alloc %d; want more than %d", i, before)
		big, err := c.Alloc(uint64(abi.Page2M), abi.Page2M)
		require.NoError(t, err, "Alloc %d of 2 MiB", i)
		require.NoError(t, c.Free(big), "Free %d of 2 MiB", i)
	}
	held := c.TablePages()
	require.GreaterOrEqual(t, held, root+kept, "TablePages with %d sparse pages; want a leaf each at least", kept)
	require.Equal(t, poolFree-held, d.TablePoolFree(), "TablePoolFree with %d table pages held", held)

	for i, va := range vas {
		before := c.TablePages()
		require.NoError(t, c.Free(va), "Free %d of 4 KiB", i)
		require.Less(t, c.TablePages(), before, "TablePages after Free %d; want less than %d", i, before)
	}
	require.Equal(t, root, c.TablePages(), "TablePages after every Free; want the root's")
	require.Equal(t, poolFree-root, d.TablePoolFree(), "TablePoolFree after every Free")

	require.NoError(t, c.Close())
	require.Equal(t, uint64(0), c.TablePages(), "TablePages after Close")
	require.Equal(t, poolFree, d.TablePoolFree(), "TablePoolFree after Close")
}
