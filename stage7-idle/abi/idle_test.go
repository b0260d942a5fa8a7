package abi

import "testing"

func TestIdleRegistersHaveOneWriterPerCacheLine(t *testing.T) {
	line := func(off uint64) uint64 { return off / 64 }
	engineWritten := []uint64{RegHead, RegFence, RegFenceCycles, RegIrqCount, RegNeedWakeup, RegSleeps}
	driverWritten := []uint64{RegDoorbell, RegIrqArm, RegIrqTarget, RegIdleMode, RegIdleBudget}
	for _, e := range engineWritten {
		for _, d := range driverWritten {
			if line(e) == line(d) {
				t.Errorf("engine-written %#x and driver-written %#x share cache line %d", e, d, line(e))
			}
		}
	}
	for _, off := range append(engineWritten, driverWritten...) {
		if off%8 != 0 || off+8 > EngineRegStride {
			t.Errorf("register %#x is not an aligned word inside the engine's bank", off)
		}
	}
}

func TestIdleModes(t *testing.T) {
	tests := []struct {
		mode    IdleMode
		name    string
		defined bool
	}{
		{IdleHybrid, "hybrid", true}, // the reset value of RegIdleMode is zero
		{IdleSpin, "spin", true},
		{IdleSleep, "sleep", true},
		{3, "idlemode(3)", false},
	}
	for _, tt := range tests {
		if got := tt.mode.String(); got != tt.name {
			t.Errorf("IdleMode(%d).String() = %q; want %q", uint64(tt.mode), got, tt.name)
		}
		if got := tt.mode.Defined(); got != tt.defined {
			t.Errorf("IdleMode(%d).Defined() = %v; want %v", uint64(tt.mode), got, tt.defined)
		}
	}
	if IdleHybrid != 0 {
		t.Errorf("IdleHybrid = %d; want 0, the reset value", uint64(IdleHybrid))
	}
}
