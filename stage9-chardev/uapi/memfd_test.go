package uapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"softgpu/stage9-chardev/abi"
)

// TestMemfdSizes pins the memfd sizes for a few ring sizes: the daemon
// sizes its memfds with these, a client checks what it maps against them.
func TestMemfdSizes(t *testing.T) {
	tests := []struct {
		ringSize     uint32
		user, status uint64
	}{
		{1, 2 * PageSize, 2 * PageSize},
		{64, 2 * PageSize, 2 * PageSize},    // 4 KiB of slots, 1 KiB of completions
		{256, 5 * PageSize, 2 * PageSize},   // 16 KiB, 4 KiB
		{1024, 17 * PageSize, 5 * PageSize}, // 64 KiB, 16 KiB
	}
	for _, tt := range tests {
		assert.Equal(t, tt.user, UserSize(tt.ringSize), "UserSize(%d)", tt.ringSize)
		assert.Equal(t, tt.status, StatusSize(tt.ringSize), "StatusSize(%d)", tt.ringSize)
	}
	assert.Equal(t, uint64(3*PageSize), PublicSize(), "PublicSize()")
}

// TestMemfdPages: each memfd page holds a register page whole, and the
// registers a client uses fall inside the page they belong to.
func TestMemfdPages(t *testing.T) {
	if PageSize != abi.RegPageSize {
		t.Fatalf("PageSize = %d; abi.RegPageSize = %d", PageSize, abi.RegPageSize)
	}
	for e := range abi.Engine(abi.NumEngines) {
		assert.Equal(t, uint64(PageSize*(1+int(e))), PublicEngineOffset(e), "PublicEngineOffset(%v)", e)
		if PublicEngineOffset(e)+PageSize > PublicSize() {
			t.Errorf("engine %v's page ends past the public memfd", e)
		}
	}
	regs := []struct {
		name   string
		offset uint64
	}{
		{"RegDoorbell", abi.RegDoorbell}, {"RegIrqArm", abi.RegIrqArm}, {"RegIrqTarget", abi.RegIrqTarget},
		{"RegChannelFault", abi.RegChannelFault}, {"RegFence", abi.RegFence},
		{"RegEngineState", abi.RegEngineState}, {"RegNeedWakeup", abi.RegNeedWakeup},
		{"RegID", abi.RegID - abi.GlobalPage}, {"RegDeviceState", abi.RegDeviceState - abi.GlobalPage},
	}
	for _, r := range regs {
		if r.offset+8 > PageSize {
			t.Errorf("%s at %#x is not inside one page", r.name, r.offset)
		}
	}
	if UserDoorbellOffset+PageSize > UserRingOffset || StatusPageOffset+PageSize > StatusCompletionsOffset {
		t.Errorf("a memfd's first page overlaps its ring")
	}
	// The completion ring's entry for index i starts at word
	// abi.CompletionWord(i, mask); its two words are the index and the
	// status.
	if CompletionStatusWord >= abi.CompletionWords || CompletionIndexWord == CompletionStatusWord {
		t.Errorf("completion words %d, %d in a %d-word entry", CompletionIndexWord, CompletionStatusWord, abi.CompletionWords)
	}
}
