package book

import (
	"fmt"
	"slices"
	"strings"

	"softgpu/tools/internal/records"
)

// This file checks what the prose says of a machine placement. A record
// of schema 2 keeps, for every row and pass, a canary: one cache line
// bounced between two goroutines, timed just before the row ran and just
// after (records.RowCanary); and, for every pass, a pass canary taken
// before the pass and after it (records.Canary). On the 2-vCPU guests this
// book is measured on a canary reads one of a few values several times
// apart, one per placement of the two vCPUs, so a chapter can say that a
// row "ran near" or "ran far" in a pass. Such a sentence is a reading of
// the record like any figure, and a re-take can turn it over; so it
// carries a claim on the canary:
//
//	ran near in its second pass{{#claim record=roundtrip
//	    a=stage0-mailbox:RoundTripPaired unit=canary-ns op="<" value=200
//	    stat=pass2 show=none}}
//
// holds when both of that pass's canaries read under 200 ns. Both, not
// either: a row whose canary moved during it ran in no one placement.
// end=before or end=after reads one of the two, for a sentence about one
// end of a row or a pass. a=pass reads the record's pass canary instead of
// a row's (a=pass:STAGE where the record took one per stage). The bounds
// themselves are the chapter's to state — what "near" means on one
// machine is not what it means on another — and the chapter on measuring
// states the ones this edition's chapters use.

// canaryUnit is the unit= that makes a claim read canaries.
const canaryUnit = "canary-ns"

// canaryClaim renders and checks {{#claim unit=canary-ns}}: the canaries
// of a= (a row, or the pass) in pass stat=passN, both or the one end=
// names, hold OP value=.
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
	end := d.arg("end", "both")
	if end != "both" && end != "before" && end != "after" {
		return inlineValue{}, d.errorf("end=%s: want before, after or both", end)
	}
	arg, err := d.require("a")
	if err != nil {
		return inlineValue{}, err
	}
	rec, err := b.records.get(recName)
	if err != nil {
		return inlineValue{}, d.errorf("a=: %v", err)
	}
	var what string           // "the canaries of stage7-idle Quiet", "the pass canaries"
	var before, after float64 // the two canaries of pass
	if stage, isPass := strings.CutPrefix(arg, "pass"); isPass && (stage == "" || stage[0] == ':') {
		stage = strings.TrimPrefix(stage, ":")
		var found, perStage bool
		for _, c := range rec.Canary {
			perStage = perStage || c.Stage != ""
			if c.Pass == pass && c.Stage == stage {
				before, after, found = c.Before, c.After, true
			}
		}
		switch {
		case !found && perStage && stage == "":
			return inlineValue{}, d.errorf("a=pass: record %s took its pass canaries stage by stage: write a=pass:STAGE", rec.Name)
		case !found:
			return inlineValue{}, d.errorf("a=%s: record %s has no pass canary for pass %d", arg, rec.Name, pass)
		}
		what = "the pass canaries"
		if stage != "" {
			what += " of " + stage
		}
	} else {
		name, c, err := rowCanary(d, rec, "a", arg, pass)
		if err != nil {
			return inlineValue{}, err
		}
		what, before, after = "the canaries of "+name, c.Before, c.After
	}
	read := fmt.Sprintf("%s and %s (before, after)", FormatValue(before, canaryUnit), FormatValue(after, canaryUnit))
	shown := FormatValue(before, canaryUnit) + " and " + FormatValue(after, canaryUnit)
	var held bool
	checked := "both " + symbol + " " + FormatValue(want, canaryUnit)
	switch end {
	case "before":
		held, checked, shown = holds(before, want), "the one before "+symbol+" "+FormatValue(want, canaryUnit), FormatValue(before, canaryUnit)
	case "after":
		held, checked, shown = holds(after, want), "the one after "+symbol+" "+FormatValue(want, canaryUnit), FormatValue(after, canaryUnit)
	default:
		held = holds(before, want) && holds(after, want)
	}
	if !held {
		return inlineValue{}, d.errorf("claim does not hold: %s in pass %d of record %s read %s, not %s", what, pass, rec.Name, read, checked)
	}
	v := inlineValue{Title: fmt.Sprintf("Checked when the book is built: %s in pass %d read %s, %s (record %s.json)", what, pass, read, checked, rec.Name), Class: "figure claim"}
	switch show := d.arg("show", "none"); show {
	case "a":
		v.Text = shown
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

// placedClaim renders and checks {{#claim unit=canary-ns placed=same|apart}}:
// whether rows a= and b= ran in one placement in pass stat=passN, by the
// test a ratio of the two applies (pairedRatio): all four canaries, before
// and after each row, within the record's tolerance of one another. It is
// what a sentence saying that the canaries paired two rows in a pass, or
// kept them apart, rests on. It prints nothing.
func (b *builder) placedClaim(d directive, recName, stat string) (inlineValue, error) {
	for _, k := range []string{"op", "value", "ratio", "end", "show", "record_b"} {
		if _, has := d.Args[k]; has {
			return inlineValue{}, d.errorf("placed= takes no %s=", k)
		}
	}
	placed := d.Args["placed"]
	if placed != "same" && placed != "apart" {
		return inlineValue{}, d.errorf("placed=%s: want same or apart", placed)
	}
	pass, ok := passNumber(stat)
	if !ok {
		return inlineValue{}, d.errorf("placed= needs stat=passN: a placement belongs to one pass")
	}
	rec, err := b.records.get(recName)
	if err != nil {
		return inlineValue{}, d.errorf("%v", err)
	}
	var cs []float64
	var names []string
	for _, key := range []string{"a", "b"} {
		arg, err := d.require(key)
		if err != nil {
			return inlineValue{}, err
		}
		name, c, err := rowCanary(d, rec, key, arg, pass)
		if err != nil {
			return inlineValue{}, err
		}
		cs = append(cs, c.Before, c.After)
		names = append(names, name)
	}
	lo, hi := slices.Min(cs), slices.Max(cs)
	tol := rec.CanaryTolerance()
	same := lo > 0 && hi/lo <= tol
	read := fmt.Sprintf("%s's canaries %s and %s, %s's %s and %s: highest over lowest %.3g against the tolerance %.3g",
		names[0], FormatValue(cs[0], canaryUnit), FormatValue(cs[1], canaryUnit), names[1], FormatValue(cs[2], canaryUnit), FormatValue(cs[3], canaryUnit), hi/lo, tol)
	if same != (placed == "same") {
		verdict := "ran in one placement"
		if !same {
			verdict = "did not run in one placement"
		}
		return inlineValue{}, d.errorf("claim does not hold: in pass %d of record %s the two rows %s (%s)", pass, rec.Name, verdict, read)
	}
	v := inlineValue{Title: fmt.Sprintf("Checked when the book is built: in pass %d, %s (record %s.json)", pass, read, rec.Name), Class: "figure claim"}
	if recordDirty(rec) {
		v.Class += " dirty"
		v.Title += "; " + dirtyNote
	}
	b.markStale(&v, rec)
	return v, nil
}

// rowCanary finds the canary of pass of the row key=STAGE:BENCH (arg)
// names in rec, and the row's name for messages: "stage7-idle Quiet".
func rowCanary(d directive, rec *records.Record, key, arg string, pass int) (string, records.RowCanary, error) {
	stage, bench, ok := strings.Cut(arg, ":")
	if !ok || stage == "" || bench == "" {
		return "", records.RowCanary{}, d.errorf("%s=%s: want %s=STAGE:BENCHMARK", key, arg, key)
	}
	row, found := findRow(rec, stage, bench)
	if !found {
		return "", records.RowCanary{}, d.errorf("%s=: record %s has no benchmark %q in %s", key, rec.Name, bench, stage)
	}
	c, ok := row.CanaryOf(pass)
	if !ok {
		return "", records.RowCanary{}, d.errorf("%s=: %s %s in record %s has no canary for pass %d", key, stage, bench, rec.Name, pass)
	}
	return stage + " " + bench, c, nil
}
