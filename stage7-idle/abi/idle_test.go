package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

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
		assert.Equal(t, tt.name, tt.mode.String(), "IdleMode(%d).String()", uint64(tt.mode))
		assert.Equal(t, tt.defined, tt.mode.Defined(), "IdleMode(%d).Defined()", uint64(tt.mode))
	}
	if IdleHybrid != 0 {
		t.Errorf("IdleHybrid = %d; want 0, the reset value", uint64(IdleHybrid))
	}
	if DefaultIdleBudgetMin > DefaultIdleBudget || DefaultIdleBudget > DefaultIdleBudgetMax {
		t.Errorf("default budget %d outside the default adaptive bounds [%d, %d]", DefaultIdleBudget, DefaultIdleBudgetMin, DefaultIdleBudgetMax)
	}
}
