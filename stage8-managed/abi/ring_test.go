package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRingOffsets pins where an index lands: the mask, not the index, picks
// the entry, so indices far apart — and on either side of 2^64 — share
// entries.
func TestRingOffsets(t *testing.T) {
	const mask = 8 - 1
	tests := []struct {
		index            uint64
		slot, completion uint64
	}{
		{0, 0, 0},
		{7, 7 * CommandSize, 7 * CompletionWords},
		{8, 0, 0},
		{1<<32 + 3, 3 * CommandSize, 3 * CompletionWords},
		{1<<64 - 1, 7 * CommandSize, 7 * CompletionWords},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.slot, SlotOffset(tt.index, mask), "SlotOffset(%#x)", tt.index)
		assert.Equal(t, tt.completion, CompletionWord(tt.index, mask), "CompletionWord(%#x)", tt.index)
	}
}

// TestCompletedIsWrapSafe: an entry that holds a later lap's index still
// says an earlier command completed, across 2^64 too; one that holds an
// earlier lap's does not.
func TestCompletedIsWrapSafe(t *testing.T) {
	tests := []struct {
		entry, i uint64
		want     bool
	}{
		{5, 5, true},
		{4, 5, false},
		{5 + 256, 5, true},
		{1<<64 - 1, 1<<64 - 1, true},
		{3, 1<<64 - 2, true},  // the entry moved past the wrap
		{1<<64 - 2, 3, false}, // a lap behind, across the wrap
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Completed(tt.entry, tt.i), "Completed(%#x, %#x)", tt.entry, tt.i)
	}
}
