package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWindowLayout pins the DMA window's place in the register space: a
// page of its own, entries inside it, RegDMAHeld on a line of its own in
// the engine's status page.
func TestWindowLayout(t *testing.T) {
	if WindowPage%RegPageSize != 0 || WindowPage < ChannelStatusPage(NumChannels-1)+RegPageSize {
		t.Errorf("the window page (%#x) is not a page of its own after the banks", WindowPage)
	}
	if end := WindowRegs(WindowSlots-1) + WindowRegStride; end > WindowPage+RegPageSize {
		t.Errorf("the last window entry ends at %#x, past its page", end)
	}
	for _, off := range []uint64{RegWinHost, RegWinBus, RegWinSize, RegWinEnable} {
		if off+8 > WindowRegStride {
			t.Errorf("window register %#x falls outside its entry's %#x bytes", off, WindowRegStride)
		}
	}
	if RegDMAHeld/64 == RegEngineState/64 {
		t.Errorf("RegDMAHeld shares a line with RegEngineState")
	}
	if WindowSlots > 64 {
		t.Errorf("WindowSlots = %d; RegDMAHeld has one bit per entry, 64 at most", WindowSlots)
	}
}

// TestBusAddressesAreNotDeviceAddresses: the bus range starts above any
// device memory (16 GiB at most) and does not wrap.
func TestBusAddressesAreNotDeviceAddresses(t *testing.T) {
	const maxDeviceMemory = 16 << 30
	if BusBase <= maxDeviceMemory {
		t.Errorf("BusBase = %#x; want above the largest device memory, %#x", uint64(BusBase), uint64(maxDeviceMemory))
	}
	if BusBase+BusSize < BusBase {
		t.Errorf("BusBase+BusSize wraps 2^64")
	}
}

func TestStatusNoDMA(t *testing.T) {
	assert.Equal(t, "bus address not mapped by the DMA window", StatusNoDMA.String(), "StatusNoDMA.String()")
}
