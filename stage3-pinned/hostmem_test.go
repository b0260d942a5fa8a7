package softgpu_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage3-pinned"
	"softgpu/stage3-pinned/abi"
	"softgpu/stage3-pinned/internal/leakcheck"
)

func hostAlloc(t testing.TB, g *softgpu.GPU, n uint64) *softgpu.HostBuffer {
	t.Helper()
	h, err := g.HostAlloc(n)
	require.NoError(t, err)
	return h
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i>>8) ^ seed
	}
	return b
}

// TestWriteReadEveryKindOfMemory round-trips pageable and pinned slices of
// sizes from one byte to several bounce chunks, with odd remainders.
func TestWriteReadEveryKindOfMemory(t *testing.T) {
	leakcheck.Check(t)
	const chunk = 4096
	g, err := softgpu.Open(softgpu.Config{MemorySize: 4 << 20, BounceChunk: chunk, BounceBuffers: 3})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	const maxSize = 5*chunk + 123
	dev := mustAlloc(t, g, maxSize)
	pinned := hostAlloc(t, g, maxSize)
	defer g.HostFree(pinned)
	for _, size := range []int{1, 3, chunk - 1, chunk, chunk + 1, 3*chunk + 7, maxSize} {
		for _, mem := range []string{"pageable", "pinned"} {
			t.Run(fmt.Sprintf("mem=%s/size=%d", mem, size), func(t *testing.T) {
				want := pattern(size, byte(size))
				host := make([]byte, size)
				if mem == "pinned" {
					host = pinned.Bytes()[:size]
				}
				copy(host, want)
				must(t, g.Write(dev, host))
				clear(host)
				must(t, g.Read(host, dev))
				assert.Equal(t, want, host, "Read after Write: %d of %d bytes differ", differing(host, want), size)
			})
		}
	}
}

// TestPinnedMemoryInCommands names pinned memory by its Ptr in commands:
// the engines read and write it with no CPU copy between.
func TestPinnedMemoryInCommands(t *testing.T) {
	g := openTest(t)
	h := hostAlloc(t, g, 4096)
	dev := mustAlloc(t, g, 4096)
	for i := range 4 {
		binary.LittleEndian.PutUint32(h.Bytes()[4*i:], uint32(i+1))
	}
	must(t, g.Copy(dev, h.Ptr(), 16))           // host → device by DMA
	must(t, g.Add32(dev, 16, 10))               // 11 12 13 14
	must(t, g.Copy(h.Ptr()+1024, dev, 16))      // device → host by DMA
	must(t, g.Sum32(h.Ptr()+2048, h.Ptr(), 16)) // a kernel reading and writing host memory: 1+2+3+4
	assert.Equal(t, uint32(14), binary.LittleEndian.Uint32(h.Bytes()[1024+12:]), "fourth word copied back")
	assert.Equal(t, uint64(10), binary.LittleEndian.Uint64(h.Bytes()[2048:]), "SUM32 over pinned memory")
	must(t, g.HostFree(h))
	assert.ErrorIs(t, g.Copy(dev, h.Ptr(), 16), abi.StatusNoDMA, "Copy from freed pinned memory")
}

func differing(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
