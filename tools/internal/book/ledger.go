package book

import (
	"math"
	"strings"

	"softgpu/tools/internal/records"
)

// This file keeps one figure per quantity per page. A quantity is a row
// and metric on one machine under one environment, read as one statistic:
// stage 0's round trip, median, on this machine. Every figure a page shows
// ({{#value}}, a {{#claim}} showing a side, each cell of a {{#table}},
// each point of a {{#chart}}) is
// entered in the page's ledger, and a second figure for the same quantity
// with another value — the same row taken from two records, say — fails
// the build, naming both. A record kept as the "before" edition of another
// (stale.go) measures an earlier code, so its figures are quantities of
// their own.

// shownFigure is the first figure a page showed for a quantity.
type shownFigure struct {
	value  float64 // in the quantity's canonical unit
	text   string  // as printed
	record string
	line   int
}

// quantityKey names what a figure measures, whatever record it came from.
func quantityKey(rec *records.Record, stage, bench, unit, stat string) string {
	canon := unit
	if classify(unit) == kindBandwidth {
		canon = "B/s"
	}
	machine := rec.Machine.Label // not machineLabel: that falls back to the record's name
	if rec.Reference {
		machine = "reference " + machine
	}
	key := strings.Join([]string{machine, strings.Join(rec.Settings.Env, " "), stage, bench, canon, stat}, "\x00")
	if _, before := beforeEdition(rec); before {
		key += "\x00before:" + rec.Name
	}
	return key
}

// noteShown enters a figure in the page's ledger; it fails when the page
// already showed the same quantity with another value.
func (b *builder) noteShown(d directive, rec *records.Record, stage, bench, unit, stat string, value float64) error {
	if b.ledger == nil {
		return nil // outside a page (a test calling a handler directly)
	}
	canon := value
	if classify(unit) == kindBandwidth {
		canon = value * bytesPerSecond(unit)
	}
	key := quantityKey(rec, stage, bench, unit, stat)
	text := FormatValue(value, unit)
	first, seen := b.ledger[key]
	if !seen {
		b.ledger[key] = shownFigure{value: canon, text: text, record: rec.Name, line: d.Line}
		return nil
	}
	if math.Abs(first.value-canon) <= 1e-9*math.Max(math.Abs(first.value), math.Abs(canon)) {
		return nil
	}
	return d.errorf("one figure per quantity per page: %s %s (%s, %s, %s) is shown here as %s from %s.json, and at line %d as %s from %s.json; show one of them",
		stage, bench, unit, stat, machineLabel(rec), text, rec.Name, first.line, first.text, first.record)
}
