package abi

import "testing"

// TestRingOffsets pins where an index lands: the mask, not the index, picks
// the slot, so indices far apart — and on either side of 2^64 — share slots.
func TestRingOffsets(t *testing.T) {
	const mask = 8 - 1
	tests := []struct {
		index            uint64
		slot, statusSlot uint64
	}{
		{0, 0, 0},
		{7, 7 * CommandSize, 7 * StatusEntrySize},
		{8, 0, 0},
		{1<<32 + 3, 3 * CommandSize, 3 * StatusEntrySize},
		{1<<64 - 1, 7 * CommandSize, 7 * StatusEntrySize},
	}
	for _, tt := range tests {
		if got := SlotOffset(tt.index, mask); got != tt.slot {
			t.Errorf("SlotOffset(%#x) = %d; want %d", tt.index, got, tt.slot)
		}
		if got := StatusOffset(tt.index, mask); got != tt.statusSlot {
			t.Errorf("StatusOffset(%#x) = %d; want %d", tt.index, got, tt.statusSlot)
		}
	}
}

func TestStatusEntryLayout(t *testing.T) {
	b := []byte{0xee, 0xee, 0xee, 0xee, 0xee}
	PutStatus(b, StatusMisaligned)
	if want := []byte{byte(StatusMisaligned), 0, 0, 0, 0xee}; string(b) != string(want) {
		t.Errorf("PutStatus(StatusMisaligned) wrote % x; want % x (4 bytes, little-endian)", b, want)
	}
	if got := LoadStatus(b); got != StatusMisaligned {
		t.Errorf("LoadStatus = %v; want %v", got, StatusMisaligned)
	}
}
