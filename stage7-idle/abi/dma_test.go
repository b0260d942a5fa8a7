package abi

import "testing"

// TestWindowLayout pins the DMA window's place in the register space and the
// one-writer-per-line rule for the registers this stage adds.
func TestWindowLayout(t *testing.T) {
	line := func(off uint64) uint64 { return off / 64 }
	if WindowRegsBase < EngineRegs(NumEngines-1)+EngineRegStride {
		t.Errorf("the window bank (%#x) overlaps the last engine's bank", WindowRegsBase)
	}
	if end := WindowRegs(WindowSlots-1) + WindowRegStride; end != RegSpaceSize {
		t.Errorf("the last window entry ends at %#x; want the end of the register space, %#x", end, RegSpaceSize)
	}
	for _, off := range []uint64{RegWinHost, RegWinBus, RegWinSize, RegWinEnable} {
		if off+8 > WindowRegStride {
			t.Errorf("window register %#x falls outside its entry's %#x bytes", off, WindowRegStride)
		}
	}
	// RegDMAHeld has a line of its own: not the driver's lines, and not
	// the lines of the head or the fence, which waiters poll.
	for _, other := range []uint64{RegDoorbell, RegHead, RegFence, RegIrqArm} {
		if line(RegDMAHeld) == line(other) {
			t.Errorf("RegDMAHeld (%#x) shares a cache line with %#x", RegDMAHeld, other)
		}
	}
	if RegDMAHeld+8 > EngineRegStride {
		t.Errorf("RegDMAHeld (%#x) is outside the engine bank", RegDMAHeld)
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
	if got := StatusNoDMA.String(); got != "bus address not mapped by the DMA window" {
		t.Errorf("StatusNoDMA.String() = %q", got)
	}
}
