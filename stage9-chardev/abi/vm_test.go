package abi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPTEEncoding round-trips every field of an entry, and pins the bits.
func TestPTEEncoding(t *testing.T) {
	tests := []struct {
		e                     PTE
		valid, writable, host bool
		kind, frame           uint64
	}{
		{MakeTable(0x5000), true, false, false, PTETable, 0x5000},
		{MakePage(0x7000, PTEPage4K, true, false), true, true, false, PTEPage4K, 0x7000},
		{MakePage(BusBase+0x10000, PTEPage64K, false, true), true, false, true, PTEPage64K, BusBase + 0x10000},
		{MakePage(2<<20, PTEPage2M, true, false), true, true, false, PTEPage2M, 2 << 20},
		{0, false, false, false, PTETable, 0},
	}
	for _, tt := range tests {
		if tt.e.Valid() != tt.valid || tt.e.Writable() != tt.writable || tt.e.Host() != tt.host ||
			tt.e.Kind() != tt.kind || tt.e.Frame() != tt.frame || tt.e.Reserved() {
			t.Errorf("%#x: valid %v writable %v host %v kind %d frame %#x reserved %v; want %v %v %v %d %#x false",
				uint64(tt.e), tt.e.Valid(), tt.e.Writable(), tt.e.Host(), tt.e.Kind(), tt.e.Frame(), tt.e.Reserved(),
				tt.valid, tt.writable, tt.host, tt.kind, tt.frame)
		}
	}
	if got := MakePage(0x7000, PTEPage4K, true, true); uint64(got) != 0x7000|1|2|4|16 {
		t.Errorf("MakePage(0x7000, 4K, writable, host) = %#x; want %#x", uint64(got), 0x7000|1|2|4|16)
	}
	if !PTE(1<<5).Reserved() || PTE(PTEAccessed).Reserved() {
		t.Errorf("bit 5 is not reserved, or bit 6, the accessed bit, is")
	}
}

// TestPTEFragment pins the fragment field to bits 7..11, apart from every
// other field.
func TestPTEFragment(t *testing.T) {
	e := MakePage(0x7000, PTEPage4K, true, true)
	for f := uint(0); f <= 31; f++ {
		got := e.WithFragment(f)
		if got.Fragment() != f || uint64(got)&^PTEFragmentMask != uint64(e) || uint64(got)&PTEFragmentMask != uint64(f)<<7 {
			t.Errorf("WithFragment(%d) = %#x: fragment %d, rest %#x; want %d, %#x", f, uint64(got), got.Fragment(), uint64(got)&^PTEFragmentMask, f, uint64(e))
		}
		if got.Reserved() {
			t.Errorf("WithFragment(%d) sets a reserved bit", f)
		}
	}
	if PTEFragmentMask != 0xf80 || MaxFragment != 9 || 1<<(PageShift+MaxFragment) != TableSlots<<PageShift {
		t.Errorf("fragment mask %#x, max %d; want 0xf80, 9 (a 2 MiB table)", PTEFragmentMask, MaxFragment)
	}
	assert.Equal(t, e, e.WithFragment(3).WithFragment(0), "WithFragment(0) does not clear the field")
}

// TestLevels: indices pick the right bits at each level, and only the
// right kinds are leaves at each level.
func TestLevels(t *testing.T) {
	va := uint64(0x3ff)<<39 | 0x1ab<<30 | 0x0cd<<21 | 0x1ef<<12 | 0x123
	for level, want := range []uint64{0x3ff, 0x1ab, 0x0cd, 0x1ef} {
		assert.Equal(t, want, LevelIndex(va, level), "LevelIndex(level %d)", level)
	}
	leaves := []struct {
		kind  uint64
		level int
		size  PageSize
		ok    bool
	}{
		{PTEPage1G, 1, Page1G, true}, {PTEPage2M, 2, Page2M, true}, {PTEPage4K, 3, Page4K, true},
		{PTEPage64K, 3, Page64K, true}, {PTEPage4K, 2, 0, false}, {PTEPage2M, 0, 0, false}, {PTETable, 3, 0, false},
	}
	for _, tt := range leaves {
		size, ok := LeafSize(MakePage(0, tt.kind, false, false), tt.level)
		if size != tt.size || ok != tt.ok {
			t.Errorf("LeafSize(kind %d, level %d) = %v, %v; want %v, %v", tt.kind, tt.level, size, ok, tt.size, tt.ok)
		}
	}
	if RootBytes != 8192 || TableBytes != 4096 || 1<<VABits != uint64(RootSlots)<<39 {
		t.Errorf("table sizes: root %d, table %d, VA bits %d", RootBytes, TableBytes, VABits)
	}
}
