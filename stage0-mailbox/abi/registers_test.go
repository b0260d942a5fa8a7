package abi

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRegisterTable checks the rules of the register space against the
// table: every register is an aligned word inside the space, no two
// overlap, every cache line has one writer, and every page has one class —
// and the class agrees with the writer (the device writes read-only pages,
// the driver the others).
func TestRegisterTable(t *testing.T) {
	table := Table()
	if len(table) == 0 {
		t.Fatal("Table() is empty")
	}
	byOffset := slices.Clone(table)
	slices.SortFunc(byOffset, func(a, b Register) int { return int(a.Offset) - int(b.Offset) })
	lineWriter := map[uint64]Register{}
	pageClass := map[uint64]Register{}
	for i, r := range byOffset {
		if r.Offset%8 != 0 || r.Offset+8 > RegSpaceSize {
			t.Errorf("%s at %#x is not an aligned word inside the %#x-byte space", r.Name, r.Offset, RegSpaceSize)
		}
		if i > 0 && byOffset[i-1].Offset == r.Offset {
			t.Errorf("%s and %s share offset %#x", byOffset[i-1].Name, r.Name, r.Offset)
		}
		if w, ok := lineWriter[r.Offset/64]; ok && w.Writer != r.Writer {
			t.Errorf("cache line %#x has two writers: %s (%v) and %s (%v)", r.Offset/64*64, w.Name, w.Writer, r.Name, r.Writer)
		}
		lineWriter[r.Offset/64] = r
		if c, ok := pageClass[r.Offset/RegPageSize]; ok && c.Class != r.Class {
			t.Errorf("page %#x mixes classes: %s is %v, %s is %v", r.Offset/RegPageSize*RegPageSize, c.Name, c.Class, r.Name, r.Class)
		}
		pageClass[r.Offset/RegPageSize] = r
		assert.Equal(t, (r.Writer == WrittenByDevice), r.Class == PageReadOnly, "%s is written by the %v but sits in a %v page", r.Name, r.Writer, r.Class)
	}
}

// TestBanksDoNotOverlap: each engine's and channel's pages are distinct and
// page-aligned, so a later stage can map one channel's pages alone.
func TestBanksDoNotOverlap(t *testing.T) {
	seen := map[uint64]string{GlobalPage: "global", ControlPage: "control"}
	add := func(name string, page uint64) {
		t.Helper()
		assert.Equal(t, uint64(0), page%RegPageSize, "%s page %#x is not page-aligned", name, page)
		if other, ok := seen[page]; ok {
			t.Errorf("%s and %s share page %#x", name, other, page)
		}
		seen[page] = name
		if page+RegPageSize > RegSpaceSize {
			t.Errorf("%s page %#x ends past the register space (%#x)", name, page, RegSpaceSize)
		}
	}
	for e := range Engine(NumEngines) {
		add(e.String()+" status", EngineStatusPage(e))
	}
	for c := range Channel(NumChannels) {
		add(c.String()+" doorbell", DoorbellPage(c))
		add(c.String()+" status", ChannelStatusPage(c))
	}
}

func TestDefaultChannels(t *testing.T) {
	for e := range Engine(NumEngines) {
		c := DefaultChannel(e)
		if !c.Valid() || c.Engine() != e {
			t.Errorf("DefaultChannel(%v) = %v, valid %v, engine %v; want a valid channel of %v", e, c, c.Valid(), c.Engine(), e)
		}
	}
	if Channel(NumChannels).Valid() {
		t.Errorf("Channel(%d).Valid() = true; want false", NumChannels)
	}
}
