package driver

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/device"
	"softgpu/stage8-managed/internal/leakcheck"
)

// TestStagedCopies copies ordinary slices both ways through bounce rings of
// several shapes, for sizes around every chunk boundary and past the point
// where the ring of buffers wraps. Each chunk is one COPY, so the doorbells
// count the chunks.
func TestStagedCopies(t *testing.T) {
	const dst = 8192
	shapes := []struct {
		name     string
		ringSize uint64 // the command ring: smaller than the bounce ring makes the submitter wait for room
		cfg      Config
		sizes    []int
	}{
		{"chunk=1000/buffers=3", 0, Config{BounceChunk: 1000, BounceBuffers: 3},
			[]int{1, 999, 1000, 1001, 2999, 3000, 3001, 7013, 64<<10 + 5}},
		{"chunk=4096/buffers=1", 0, Config{BounceChunk: 4096, BounceBuffers: 1},
			[]int{1, 4095, 4096, 3*4096 + 1}},
		{"chunk=512/buffers=8/ring=2", 2, Config{BounceChunk: 512, BounceBuffers: 8},
			[]int{511, 512, 8*512 + 1, 20*512 + 7}},
		{"default", 0, Config{},
			[]int{DefaultBounceChunk - 1, DefaultBounceChunk + 1, DefaultBounceBuffers*DefaultBounceChunk + 3}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			d := openPinned(t, device.Config{RingSize: shape.ringSize}, shape.cfg)
			chunk := int(d.bounce.chunk)
			for i, size := range shape.sizes {
				src := patterned(size, byte(i))
				bells := d.Doorbells()
				require.NoError(t, d.CopyToDevice(dst, src), "CopyToDevice(%d bytes)", size)
				if got := d.hw.Memory()[dst : dst+size]; !bytes.Equal(got, src) {
					t.Errorf("CopyToDevice(%d bytes): device memory differs at byte %d", size, firstDifference(got, src))
				}
				got := make([]byte, size)
				require.NoError(t, d.CopyFromDevice(got, dst), "CopyFromDevice(%d bytes)", size)
				assert.Equal(t, src, got, "CopyFromDevice(%d bytes) differs at byte %d", size, firstDifference(got, src))
				chunks := (size + chunk - 1) / chunk
				if rung := d.Doorbells() - bells; shape.ringSize == 0 && rung != uint64(2*chunks) {
					t.Errorf("%d bytes both ways: %d doorbells; want %d, one per chunk", size, rung, 2*chunks)
				}
			}
		})
	}
}

// TestConcurrentCopies runs staged and pinned copies from several
// goroutines at once, each on its own stretch of device memory. Staged
// copies take turns on the bounce ring; under -race this also checks that
// discipline.
func TestConcurrentCopies(t *testing.T) {
	d := openPinned(t, device.Config{}, Config{BounceChunk: 4096, BounceBuffers: 2})
	const workers, size = 4, 3*4096 + 100
	pinned := hostAlloc(t, d, workers*size)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			dst := uint64(AllocBase + w*size)
			src := patterned(size, byte(w))
			host := src
			if w%2 == 1 { // odd workers copy from and to pinned memory
				host = pinned.Bytes()[w*size : (w+1)*size]
				copy(host, src)
			}
			for round := range 20 {
				if !assert.NoError(t, d.CopyToDevice(dst, host), "worker %d round %d: CopyToDevice", w, round) {
					return
				}
				got := make([]byte, size)
				if !assert.NoError(t, d.CopyFromDevice(got, dst), "worker %d round %d: CopyFromDevice", w, round) {
					return
				}
				if !assert.Equal(t, src, got, "worker %d round %d: read back differs at byte %d", w, round, firstDifference(got, src)) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestCloseDuringStagedCopies closes the driver while goroutines stage
// copies in and out: each copy returns nil or ErrClosed, and Close frees the
// bounce ring only once they are out of it (a buffer unmapped under a CPU
// copy would crash the test).
func TestCloseDuringStagedCopies(t *testing.T) {
	for round := range 5 {
		d := openPinned(t, device.Config{}, Config{BounceChunk: 64 << 10, BounceBuffers: 2})
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				buf := make([]byte, 1<<20)
				for {
					err := d.CopyToDevice(AllocBase, buf)
					if w == 1 {
						err = d.CopyFromDevice(buf, AllocBase)
					}
					if err == nil {
						continue
					}
					assert.ErrorIs(t, err, ErrClosed, "round %d: staged copy interrupted by Close", round)
					return
				}
			})
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		d.Close()
		wg.Wait()
		if d.bounce.pinned != nil {
			t.Errorf("round %d: the bounce ring is still mapped after Close", round)
		}
	}
}

func TestBounceConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BounceChunk: maxBounceChunk + 1},
		{BounceBuffers: -1},
		{BounceBuffers: maxBounceBuffers + 1},
	} {
		t.Run(fmt.Sprintf("%+v", cfg), func(t *testing.T) {
			leakcheck.Check(t)
			dev, err := device.Open(device.Config{MemorySize: 1 << 20})
			require.NoError(t, err)
			defer dev.Close()
			_, err = New(dev, cfg)
			assert.ErrorIs(t, err, ErrConfig, "New(%+v)", cfg)
		})
	}
}
