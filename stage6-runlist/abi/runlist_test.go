package abi

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunlistEntryLayout pins the entry's bytes and round-trips every field.
func TestRunlistEntryLayout(t *testing.T) {
	e := RunlistEntry{Channel: 0x0102, Priority: 3, Flags: RunlistPrivileged, Context: 0x0304,
		Timeslice: 0x1122334455667788, State: 0x0000_0000_00ab_cd40, CtxSave: 0x0000_0000_0123_4500}
	b := make([]byte, RunlistEntrySize)
	for i := range b {
		b[i] = 0xff // Encode must clear the reserved bytes
	}
	e.Encode(b)
	want := []byte{
		0x02, 0x01, 3, 1, 0x04, 0x03, 0, 0,
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		0x40, 0xcd, 0xab, 0, 0, 0, 0, 0,
		0x00, 0x45, 0x23, 0x01, 0, 0, 0, 0,
	}
	require.Equal(t, want, b, "Encode")
	got, ok := DecodeRunlistEntry(b)
	if !ok || got != e {
		t.Fatalf("Decode = %+v, %v; want %+v, true", got, ok, e)
	}
	for _, i := range []int{3, 6, 7} {
		bad := bytes.Clone(b)
		bad[i] |= 0x80
		if _, ok := DecodeRunlistEntry(bad); ok {
			t.Errorf("byte %d set to %#x: Decode ok; want reserved bits refused", i, bad[i])
		}
	}
}

// TestRunlistErrorNamesTheEntry: an error carries its kind and entry.
func TestRunlistErrorNamesTheEntry(t *testing.T) {
	r := RunlistDuplicate | 5<<8
	if r.Kind() != RunlistDuplicate || r.Entry() != 5 || r.String() != "channel listed twice (entry 5)" {
		t.Errorf("RunlistError %#x: kind %v, entry %d, %q", uint64(r), r.Kind(), r.Entry(), r.String())
	}
	if ChannelStateSize < StateDesc+CommandSize || StateDesc%64 != 0 {
		t.Errorf("state block: %d bytes, descriptor at %#x; the descriptor must fit, on a line of its own", ChannelStateSize, StateDesc)
	}
}
