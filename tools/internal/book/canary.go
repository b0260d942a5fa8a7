package book

import (
	"fmt"
	"strings"
)

// This file checks what the prose says of a machine placement. A record
// of schema 2 keeps, for every row and pass, a canary: one cache line
// bounced between two goroutines, timed just before the row ran and just
// after (records.RowCanary). On the 2-vCPU guests this book is measured on
// it reads one of a few values several times apart, one per placement of
// the two vCPUs, so a chapter can say that a row "ran near" or "ran far"
// in a pass. Such a sentence is a reading of the record like any figure,
// and a re-take can turn it over; so it carries a claim on the canary:
//
//	ran near in its second pass{{#claim record=roundtrip
//	    a=stage0-mailbox:RoundTripPaired unit=canary-ns op="<" value=200
//	    stat=pass2 show=none}}
//
// holds when both of that pass's canaries read under 200 ns. Both, not
// either: a row whose canary moved during it ran in no one placement. The
// bounds themselves are the chapter's to state — what "near" means on one
// machine is not what it means on another — and the chapter on measuring
// states the ones this edition's chapters use.

// canaryUnit is the unit= that makes a claim read a row's canaries.
const canaryUnit = "canary-ns"

// canaryClaim renders and checks {{#claim unit=canary-ns}}: both canaries
// of row a= in pass stat=passN hold OP value=.
func (b *builder) canaryClaim(d directive, recName, stat, symbol string, holds func(x, y float64) bool) (inlineValue, error) {
	if _, has := d.Args["b"]; has {
		return inlineValue{}, d.errorf("unit=%s reads one row's canaries: drop b=", canaryUnit)
	}
	if _, has := d.Args["ratio"]; has {
		return inlineValue{}, d.errorf("unit=%s compares the canaries with value=, not ratio=", canaryUnit)
	}
	pass, ok := passNumber(stat)
	if !ok {
		return inlineValue{}, d.errorf("unit=%s needs stat=passN: a canary belongs to one pass", canaryUnit)
	}
	valueArg, err := d.require("value")
	if err != nil {
		return inlineValue{}, err
	}
	want, err := parseUnitValue(valueArg, canaryUnit)
	if err != nil {
		return inlineValue{}, d.errorf("value=%s: %v", valueArg, err)
	}
	arg, err := d.require("a")
	if err != nil {
		return inlineValue{}, err
	}
	stage, bench, ok := strings.Cut(arg, ":")
	if !ok || stage == "" || bench == "" {
		return inlineValue{}, d.errorf("a=%s: want a=STAGE:BENCHMARK", arg)
	}
	rec, err := b.records.get(recName)
	if err != nil {
		return inlineValue{}, d.errorf("a=: %v", err)
	}
	row, found := findRow(rec, stage, bench)
	if !found {
		return inlineValue{}, d.errorf("a=: record %s has no benchmark %q in %s", rec.Name, bench, stage)
	}
	c, ok := row.CanaryOf(pass)
	if !ok {
		return inlineValue{}, d.errorf("a=: %s %s in record %s has no canary for pass %d", stage, bench, rec.Name, pass)
	}
	got := fmt.Sprintf("%s and %s", FormatValue(c.Before, canaryUnit), FormatValue(c.After, canaryUnit))
	if !holds(c.Before, want) || !holds(c.After, want) {
		return inlineValue{}, d.errorf("claim does not hold: the canaries of %s %s in pass %d of record %s read %s (before the row, after it), not both %s %s",
			stage, bench, pass, rec.Name, got, symbol, FormatValue(want, canaryUnit))
	}
	v := inlineValue{Title: fmt.Sprintf("Checked when the book is built: the canaries of %s %s in pass %d read %s (before the row, after it), both %s %s (record %s.json)",
		stage, bench, pass, got, symbol, FormatValue(want, canaryUnit), rec.Name), Class: "figure claim"}
	switch show := d.arg("show", "none"); show {
	case "a":
		v.Text = got
	case "none":
	default:
		return inlineValue{}, d.errorf("show=%s: want a or none", show)
	}
	if recordDirty(rec) {
		v.Class += " dirty"
		v.Title += "; " + dirtyNote
	}
	b.markStale(&v, rec)
	return v, nil
}
