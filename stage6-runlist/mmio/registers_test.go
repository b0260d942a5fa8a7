package mmio

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"softgpu/stage6-runlist/abi"
)

func TestLoadStore(t *testing.T) {
	r := NewRegisters(make([]atomic.Uint64, abi.RegSpaceSize/8), func() uint64 { return 42 })
	r.Store(abi.RegID, 7)
	assert.Equal(t, uint64(7), r.Load(abi.RegID), "Load(RegID) after Store(7)")
	assert.Equal(t, uint64(42), r.Load(abi.RegTimestamp), "Load(RegTimestamp); want the clock, 42")
	r.Store(abi.RegTimestamp, 9) // ignored: not a stored word
	assert.Equal(t, uint64(42), r.Load(abi.RegTimestamp), "Load(RegTimestamp) after a store; want the clock, 42")
	assert.Equal(t, uint64(abi.RegSpaceSize), r.Size(), "Size()")
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
	assert.Equal(t, uint64(0b010), r.Load(abi.RegIrqCause), "RegIrqCause after acknowledging %#b", read)
}
