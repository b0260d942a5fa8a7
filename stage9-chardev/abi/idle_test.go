package abi

import "testing"

func TestIdleModes(t *testing.T) {
	tests := []struct {
		mode    IdleMode
		name    string
		defined bool
	}{
		{IdleHybrid, "hybrid", true}, // the reset value of RegIdleMode is zero
		{IdleSpin, "spin", true},
		{IdleSleep, "sleep", true},
		{IdleAdaptive, "adaptive", true},
		{4, "idlemode(4)", false},
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
	if DefaultIdleBudgetMin > DefaultIdleBudget || DefaultIdleBudget > DefaultIdleBudgetMax {
		t.Errorf("default budget %d outside the default adaptive bounds [%d, %d]", DefaultIdleBudget, DefaultIdleBudgetMin, DefaultIdleBudgetMax)
	}
}
