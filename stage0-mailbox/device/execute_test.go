package device

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFill checks fill at the sizes where its pieces meet: below, at and
// above the 64-byte block, and across several doublings. Each fill runs on
// a window of a larger buffer, so a write outside the window shows up as a
// changed guard byte.
func TestFill(t *testing.T) {
	const guard = 0x5a
	for _, size := range []int{0, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			buf := make([]byte, size+128)
			for i := range buf {
				buf[i] = guard
			}
			window := buf[64 : 64+size : 64+size]
			fill(window, 0xab)
			for i, x := range buf {
				want := byte(guard)
				if i >= 64 && i < 64+size {
					want = 0xab
				}
				require.Equal(t, want, x, "fill(%d bytes): byte %d (from the window's start)", size, i-64)
			}
		})
	}
}
