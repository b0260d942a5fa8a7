package mmio

import (
	"sync/atomic"
	"testing"

	"softgpu/stage9-chardev/abi"
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

// TestWriteOneToClear: a store to an interrupt status register clears the
// bits it names and leaves the rest — a cause raised after the driver read
// the register survives its acknowledgement.
func TestWriteOneToClear(t *testing.T) {
	r := NewRegisters(make([]atomic.Uint64, abi.RegSpaceSize/8), func() uint64 { return 0 })
	r.Set(abi.RegIrqCause, 0b101)
	read := r.Load(abi.RegIrqCause)
	r.Set(abi.RegIrqCause, 0b010) // raised after the read
	r.Store(abi.RegIrqCause, read)
	if got := r.Load(abi.RegIrqCause); got != 0b010 {
		t.Errorf("RegIrqCause after acknowledging %#b = %#b; want %#b", read, got, 0b010)
	}
}
