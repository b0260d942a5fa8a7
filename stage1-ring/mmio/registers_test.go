package mmio

import (
	"sync/atomic"
	"testing"

	"softgpu/stage1-ring/abi"
)

func TestLoadStore(t *testing.T) {
	r := NewRegisters(make([]atomic.Uint64, abi.RegSpaceSize/8), func() uint64 { return 42 })
	r.Store(abi.RegID, 7)
	if got := r.Load(abi.RegID); got != 7 {
		t.Errorf("Load(RegID) after Store(7) = %d; want 7", got)
	}
	if got := r.Load(abi.RegTimestamp); got != 42 {
		t.Errorf("Load(RegTimestamp) = %d; want the clock, 42", got)
	}
	r.Store(abi.RegTimestamp, 9) // ignored: not a stored word
	if got := r.Load(abi.RegTimestamp); got != 42 {
		t.Errorf("Load(RegTimestamp) after a store = %d; want the clock, 42", got)
	}
	if got := r.Size(); got != abi.RegSpaceSize {
		t.Errorf("Size() = %#x; want %#x", got, abi.RegSpaceSize)
	}
}

// TestBadOffsetsPanic: an offset outside the space or not a word is a bug
// of the caller, and panics with the invariant's name rather than reading
// some other register.
func TestBadOffsetsPanic(t *testing.T) {
	r := NewRegisters(make([]atomic.Uint64, abi.RegSpaceSize/8), func() uint64 { return 0 })
	for _, off := range []uint64{abi.RegSpaceSize, abi.RegSpaceSize + 8, 3, 1 << 63} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Load(%#x) did not panic", off)
				}
			}()
			r.Load(off)
		}()
	}
}
