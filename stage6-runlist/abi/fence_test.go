package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFenceTimelineIsOneLine(t *testing.T) {
	if RegFence/64 != RegFenceCycles/64 {
		t.Errorf("RegFence and RegFenceCycles are on different lines; a waiter reads them as one")
	}
	if NumChannels > 64*IrqChannelWords || IrqChannelWords*8 > 64 {
		t.Errorf("NumChannels = %d in %d words of RegIrqChannels: a bit per channel, on one line", NumChannels, IrqChannelWords)
	}
	if off, bit := IrqChannelsReg(70); off != RegIrqChannels+8 || bit != 1<<6 {
		t.Errorf("IrqChannelsReg(70) = %#x, %#x; want the second word, bit 6", off, bit)
	}
}

func TestReachedIsWrapSafe(t *testing.T) {
	tests := []struct {
		timeline, fence uint64
		want            bool
	}{
		{5, 5, true},
		{6, 5, true},
		{4, 5, false},
		{0, 1<<64 - 1, true},      // the timeline has wrapped past the fence
		{1<<64 - 1, 0, false},     // the fence is just past the wrap, not yet reached
		{2, 1<<64 - 3, true},      // a comparison written timeline >= fence says false here
		{1<<64 - 3, 2, false},     // and true here
		{1 << 63, 1, true},        // far apart, still ordered
		{100, 100 + 1<<62, false}, // far ahead of the timeline
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Reached(tt.timeline, tt.fence), "Reached(%#x, %#x)", tt.timeline, tt.fence)
	}
}

func TestFlagsDefined(t *testing.T) {
	for flags := range 256 {
		want := flags&^(FlagFence|FlagInterrupt) == 0
		assert.Equal(t, want, FlagsDefined(uint8(flags)), "FlagsDefined(%#x)", flags)
	}
}
