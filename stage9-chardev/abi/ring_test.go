package abi

import "testing"

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
		if got := SlotOffset(tt.index, mask); got != tt.slot {
			t.Errorf("SlotOffset(%#x) = %d; want %d", tt.index, got, tt.slot)
		}
		if got := CompletionWord(tt.index, mask); got != tt.completion {
			t.Errorf("CompletionWord(%#x) = %d; want %d", tt.index, got, tt.completion)
		}
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
		if got := Completed(tt.entry, tt.i); got != tt.want {
			t.Errorf("Completed(%#x, %#x) = %v; want %v", tt.entry, tt.i, got, tt.want)
		}
	}
}
