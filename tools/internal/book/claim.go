package book

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file implements {{#claim}}: a comparison the prose argues from,
// checked against the record every time the book is built. It renders the
// figure it compares, like {{#ratio}} or {{#value}}, and fails the build
// when the record contradicts it, so that re-recording cannot leave a false
// sentence behind.
//
//	{{#claim record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=UNIT op=OP ratio=R
//	         [record_b=NAME] [stat=median|best|passN] [show=ratio|a|b|none]}}
//	    a/b OP R; shows a/b ("0.08×")
//	{{#claim record=NAME a=STAGE:BENCH unit=UNIT op=OP value=V
//	         [stat=...] [show=a|none]}}
//	    a OP V; shows a ("0.62 cores"). V is in unit, or carries its own
//	    (300us, 1.5ms, 5GB/s, 0.1cores).
//
//	{{#claim record=NAME a=STAGE:BENCH|pass[:STAGE] unit=canary-ns op=OP
//	         value=V stat=passN [end=both|before|after] [show=a|none]}}
//	    both of the row's canaries in pass N (the ping-pong timed just
//	    before the row and just after it), or the one end= names, OP V:
//	    what a sentence saying a row "ran near" or "ran far" in a pass
//	    rests on; a=pass reads the record's pass canary (canary.go)
//	{{#claim record=NAME a=STAGE:BENCH b=STAGE:BENCH unit=canary-ns
//	         placed=same|apart stat=passN}}
//	    the two rows ran in one placement in pass N (all four canaries
//	    within the record's tolerance of one another, the test a paired
//	    ratio applies), or did not (canary.go)
//
// OP is <, <=, > or >= (or lt, le, gt, ge, which need no quotes).
//
// A ratio of two rows of one record that both carry per-pass canaries is
// taken pass by pass: only passes in which the two rows' canaries (before and
// after each) lie within the record's canary tolerance (30 % by default) of
// one another count — the two rows ran in the same machine placement — and
// the ratio is the median of those per-pass ratios. {{#ratio}} does the same.

// claimOps are the comparisons a claim can make.
var claimOps = map[string]struct {
	symbol string
	holds  func(x, y float64) bool
}{
	"<": {"<", func(x, y float64) bool { return x < y }}, "lt": {"<", func(x, y float64) bool { return x < y }},
	"<=": {"≤", func(x, y float64) bool { return x <= y }}, "le": {"≤", func(x, y float64) bool { return x <= y }},
	">": {">", func(x, y float64) bool { return x > y }}, "gt": {">", func(x, y float64) bool { return x > y }},
	">=": {"≥", func(x, y float64) bool { return x >= y }}, "ge": {"≥", func(x, y float64) bool { return x >= y }},
}

// operand is one side of a ratio or a claim: a row of a record.
type operand struct {
	rec   *records.Record
	row   records.Row
	stage string
	fig   figure
}

// operandArgs reads what {{#ratio}} and {{#claim}} take besides their
// operands: record=, the record a= comes from (and b= unless record_b=
// says otherwise); unit=, the metric both are read in; and stat=, the
// figure taken of each.
func operandArgs(d directive) (record, unit, stat string, err error) {
	if record, err = d.require("record"); err != nil {
		return "", "", "", err
	}
	if unit, err = d.require("unit"); err != nil {
		return "", "", "", err
	}
	if stat, err = parseValueStat(d); err != nil {
		return "", "", "", err
	}
	return record, unit, stat, nil
}

// lookupOperand reads key=STAGE:BENCH from d and finds its figure in record recName.
func (b *builder) lookupOperand(d directive, key, recName, unit, stat string) (operand, error) {
	arg, err := d.require(key)
	if err != nil {
		return operand{}, err
	}
	stage, bench, ok := strings.Cut(arg, ":")
	if !ok || stage == "" || bench == "" {
		return operand{}, d.errorf("%s=%s: want %s=STAGE:BENCHMARK", key, arg, key)
	}
	rec, err := b.records.get(recName)
	if err != nil {
		return operand{}, d.errorf("%s=: %v", key, err)
	}
	if _, _, err := b.lookupValue(recName, stage, bench, unit, stat); err != nil {
		return operand{}, d.errorf("%s=: %v", key, err)
	}
	row, _ := findRow(rec, stage, bench)
	f, _ := rowFigure(row, unit, stat)
	return operand{rec: rec, row: row, stage: stage, fig: f}, nil
}

// describe is an operand for a tooltip: "stage7-idle Quiet = 0.62 cores".
func (o operand) describe(unit string) string {
	return fmt.Sprintf("%s %s = %s", o.stage, o.row.Benchmark, FormatValue(o.fig.Value, unit))
}

// pairedRatio is a/b. When both rows are of one record, the statistic is
// the median and both carry a canary per pass, it is the median of the
// per-pass ratios over the passes in which all four canaries agree within
// the record's tolerance; how says which was done, for the tooltip.
func pairedRatio(a, b operand, unit string) (ratio float64, how, span string, err error) {
	plain := func() (float64, string, string, error) {
		if b.fig.Value == 0 {
			return 0, "", "", fmt.Errorf("b= is zero: the ratio is undefined")
		}
		each := "each the " + statPhrase(a.fig.Stat, a.fig.Passes)
		if a.fig.Passes <= 1 {
			each = "each from one pass"
		}
		return a.fig.Value / b.fig.Value, "ratio of the two figures, " + each, "", nil
	}
	canA, canB := rowCanaries(a.row), rowCanaries(b.row)
	if a.rec != b.rec || a.fig.Stat != "median" || len(canA) == 0 || len(canB) == 0 {
		return plain()
	}
	mA, scaleA, _ := findMetric(a.row, unit)
	mB, scaleB, _ := findMetric(b.row, unit)
	if len(canA) != len(mA.Values) || len(canB) != len(mB.Values) {
		return plain()
	}
	byPass := map[int]int{}
	for j, c := range canB {
		byPass[c.Pass] = j
	}
	tol := a.rec.CanaryTolerance()
	var ratios []float64
	var refused []string
	for i, ca := range canA {
		j, ok := byPass[ca.Pass]
		if !ok {
			continue
		}
		cb := canB[j]
		cs := []float64{ca.Before, ca.After, cb.Before, cb.After}
		lo, hi := slices.Min(cs), slices.Max(cs)
		if lo <= 0 || hi/lo > tol {
			refused = append(refused, fmt.Sprintf("pass %d: %s, %s against %s, %s ns", ca.Pass, f1(ca.Before), f1(ca.After), f1(cb.Before), f1(cb.After)))
			continue
		}
		vb := mB.Values[j] * scaleB
		if vb == 0 {
			continue
		}
		ratios = append(ratios, mA.Values[i]*scaleA/vb)
	}
	if len(ratios) == 0 {
		return 0, "", "", fmt.Errorf("%w (all four canaries within %s of one another): %s", errUnplaced, percent(tol-1), strings.Join(refused, "; "))
	}
	slices.Sort(ratios)
	r := ratios[(len(ratios)-1)/2] // the lower middle: a ratio some pass measured
	how = fmt.Sprintf("median of the per-pass ratios over the %d of %d passes in which both rows' canaries agreed within %s (one machine placement)",
		len(ratios), len(canA), percent(tol-1))
	lo, hi := ratios[0], ratios[len(ratios)-1]
	if err := checkRatioAgainstMedians(r, a.fig.Median, b.fig.Median, unit, a, b, lo, hi); err != nil {
		return 0, "", "", err
	}
	if lo > 0 && hi/lo > ratioSpanShown {
		span = fmt.Sprintf(" (passes %s–%s)", formatRatioBare(lo), formatRatio(hi))
		how += fmt.Sprintf("; the per-pass ratios span %s to %s", formatRatio(lo), formatRatio(hi))
	}
	return r, how, span, nil
}

// The two reasons pairedRatio refuses a ratio of rows that carry canaries;
// {{#ratio refused=say}} prints which one instead of failing the build.
var (
	errUnplaced       = errors.New("no pass ran both rows in one placement")
	errPassesDisagree = errors.New("the passes disagree about this comparison")
)

// ratioSpanShown is the spread of the per-pass ratios (highest over lowest)
// beyond which a median of them is printed with its range: past 2× the
// median alone would hide that the passes disagree about the comparison.
const ratioSpanShown = 2.0

// ratioTolerance is how far a median of per-pass ratios may lie from the
// quotient of the two medians shown beside it: a reader divides the
// figures on the page, and a stated ratio more than 10 % off that (or on
// the other side of 1) reads as a contradiction.
const ratioTolerance = 0.10

// checkRatioAgainstMedians fails when the stated ratio r and the quotient
// of the medians fall on different sides of 1, or differ by more than
// ratioTolerance of the quotient.
func checkRatioAgainstMedians(r, medianA, medianB float64, unit string, a, b operand, lo, hi float64) error {
	if medianB == 0 {
		return nil
	}
	q := medianA / medianB
	// Sides of 1 are judged as printed: 0.99× beside a quotient that
	// prints 1.0× is a tie, not a contradiction.
	printed := func(x float64) float64 {
		v, _ := strconv.ParseFloat(formatRatioBare(x), 64)
		return v
	}
	sides := (printed(r)-1)*(printed(q)-1) < 0
	if !sides && math.Abs(r-q) <= ratioTolerance*q {
		return nil
	}
	why := "differ by more than 10 %"
	if sides {
		why = "fall on different sides of 1"
	}
	return fmt.Errorf("the ratio stated, %s (median of the per-pass ratios, which span %s to %s), and the quotient of the medians shown, %s ÷ %s = %s, %s: %w, so state no ratio (show the two figures) or compare rows measured in turns",
		formatRatio(r), formatRatio(lo), formatRatio(hi), FormatValue(medianA, unit), FormatValue(medianB, unit), formatRatio(q), why, errPassesDisagree)
}

// claim renders and checks {{#claim}}.
func (b *builder) claim(d directive) (inlineValue, error) {
	if passes, isList, err := passList(d.arg("stat", defaultStat)); isList {
		if err != nil {
			return inlineValue{}, d.errorf("%v", err)
		}
		return b.claimEach(d, passes)
	}
	if err := d.allow("record", "record_b", "a", "b", "unit", "op", "ratio", "value", "stat", "show", "end", "placed"); err != nil {
		return inlineValue{}, err
	}
	recA, unit, stat, err := operandArgs(d)
	if err != nil {
		return inlineValue{}, err
	}
	if _, has := d.Args["placed"]; has {
		if unit != canaryUnit {
			return inlineValue{}, d.errorf("placed= compares two rows' canaries: it needs unit=%s", canaryUnit)
		}
		return b.placedClaim(d, recA, stat)
	}
	opArg, err := d.require("op")
	if err != nil {
		return inlineValue{}, err
	}
	op, ok := claimOps[opArg]
	if !ok {
		return inlineValue{}, d.errorf("op=%s: want <, <=, >, >= (or lt, le, gt, ge)", opArg)
	}
	if unit == canaryUnit {
		return b.canaryClaim(d, recA, stat, op.symbol, op.holds)
	}
	if _, has := d.Args["end"]; has {
		return inlineValue{}, d.errorf("end= picks a canary: it needs unit=%s", canaryUnit)
	}
	ratioArg, hasRatio := d.Args["ratio"]
	valueArg, hasValue := d.Args["value"]
	_, hasB := d.Args["b"]
	switch {
	case hasRatio == hasValue:
		return inlineValue{}, d.errorf("want ratio= (a/b against it) or value= (a against it), not both or neither")
	case hasRatio && !hasB:
		return inlineValue{}, d.errorf("ratio= compares a/b: missing b=")
	case hasValue && hasB:
		return inlineValue{}, d.errorf("value= compares a alone: drop b=, or compare a/b with ratio=")
	}
	a, err := b.lookupOperand(d, "a", recA, unit, stat)
	if err != nil {
		return inlineValue{}, err
	}
	dirty := recordDirty(a.rec)
	claimRecs := []*records.Record{a.rec}

	var got, want float64
	var pair *operand // b=, when the claim compares two rows
	var shown, gotText, wantText, how, compared string
	if hasRatio {
		bo, err := b.lookupOperand(d, "b", d.arg("record_b", recA), unit, stat)
		if err != nil {
			return inlineValue{}, err
		}
		dirty = dirty || recordDirty(bo.rec)
		claimRecs = append(claimRecs, bo.rec)
		pair = &bo
		if want, err = strconv.ParseFloat(strings.TrimSuffix(ratioArg, "x"), 64); err != nil || want <= 0 || math.IsInf(want, 0) {
			return inlineValue{}, d.errorf("ratio=%s: want a positive number such as 0.1 or 5", ratioArg)
		}
		var span string
		if got, how, span, err = pairedRatio(a, bo, unit); err != nil {
			return inlineValue{}, d.errorf("%v", err)
		}
		gotText, wantText = claimRatioText(got, want, op.holds), strings.TrimSuffix(ratioArg, "x")+"×"
		ratioShown := gotText + span
		compared = fmt.Sprintf("%s ÷ %s", a.describe(unit), bo.describe(unit))
		switch show := d.arg("show", "ratio"); show {
		case "ratio":
			shown = ratioShown
		case "a":
			shown = FormatValue(a.fig.Value, unit)
			err = b.noteShown(d, a.rec, a.stage, a.row.Benchmark, unit, stat, a.fig.Value)
		case "b":
			shown = FormatValue(bo.fig.Value, unit)
			err = b.noteShown(d, bo.rec, bo.stage, bo.row.Benchmark, unit, stat, bo.fig.Value)
		case "none":
		default:
			return inlineValue{}, d.errorf("show=%s: want ratio, a, b or none", show)
		}
	} else {
		if want, err = parseUnitValue(valueArg, unit); err != nil {
			return inlineValue{}, d.errorf("value=%s: %v", valueArg, err)
		}
		got = a.fig.Value
		gotText, wantText = FormatValue(got, unit), FormatValue(want, unit)
		compared = a.stage + " " + a.row.Benchmark
		how = statPhrase(stat, a.fig.Passes)
		switch show := d.arg("show", "a"); show {
		case "a":
			shown = gotText
			err = b.noteShown(d, a.rec, a.stage, a.row.Benchmark, unit, stat, a.fig.Value)
		case "none":
		default:
			return inlineValue{}, d.errorf("show=%s: want a or none", show)
		}
	}
	if err != nil {
		return inlineValue{}, err
	}
	if !op.holds(got, want) {
		return inlineValue{}, d.errorf("claim does not hold: %s gives %s (%s), which is not %s %s", compared, gotText, how, op.symbol, wantText)
	}
	title := fmt.Sprintf("Checked when the book is built: %s gives %s %s %s (%s; record %s.json)", compared, gotText, op.symbol, wantText, how, recA)
	v := inlineValue{Text: shown, Title: title, Class: "figure claim"}
	if dirty {
		v.Class += " dirty"
		v.Title += "; " + dirtyNote
	}
	b.markStale(&v, claimRecs...)
	if pair != nil && shown != "" {
		b.markUnpaired(&v, a, *pair)
	}
	return v, nil
}

// parseUnitValue reads a constant for comparison with a metric in unit: a
// bare number is in unit itself; a time may carry ns, us, µs, ms or s; a
// bandwidth B/s, MB/s or GB/s; cores "cores".
func parseUnitValue(s, unit string) (float64, error) {
	num := strings.TrimRightFunc(s, func(r rune) bool { return !('0' <= r && r <= '9' || r == '.') })
	suffix := strings.TrimSpace(s[len(num):])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a number, optionally with a unit")
	}
	if suffix == "" {
		return v, nil
	}
	switch classify(unit) {
	case kindTime:
		if sc, ok := unitScale[suffix]; ok && sc.dim == "time" {
			return v * sc.scale, nil // records hold times in ns
		}
	case kindBandwidth:
		if suffix == "B/s" || suffix == "MB/s" || suffix == "GB/s" {
			return v * bytesPerSecond(suffix) / bytesPerSecond(unit), nil
		}
	case kindCores:
		if suffix == "cores" || suffix == "core" {
			return v, nil
		}
	default:
		if suffix == unit {
			return v, nil
		}
	}
	return 0, fmt.Errorf("unit %q does not fit the metric's %s", suffix, unit)
}

// formatRatioBare is formatRatio without its sign, for the low end of a range.
func formatRatioBare(r float64) string { return strings.TrimSuffix(formatRatio(r), "×") }

// passList reads stat=passA,B,C-D: the passes a claim is checked in, one
// by one ("pass1-3,5" is passes 1, 2, 3 and 5). isList is false for any
// other stat=, a single passN included.
func passList(stat string) (passes []int, isList bool, err error) {
	list, ok := strings.CutPrefix(stat, "pass")
	if !ok || !strings.ContainsAny(list, ",-") {
		return nil, false, nil
	}
	bad := fmt.Errorf("stat=%s: want a list of passes such as pass1,3 or pass1-3,5", stat)
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		z, errZ := strconv.Atoi(hi)
		if errA != nil || errZ != nil || a < 1 || z < a {
			return nil, true, bad
		}
		for n := a; n <= z; n++ {
			if slices.Contains(passes, n) {
				return nil, true, fmt.Errorf("stat=%s: pass %d twice", stat, n)
			}
			passes = append(passes, n)
		}
	}
	return passes, true, nil
}

// claimEach checks a claim in each of passes, as if written once per pass
// with stat=passN: the sentence it backs speaks of all of them ("in the
// first three passes"). It prints nothing, since there is no one figure to
// show; its tooltip lists what each pass gave.
func (b *builder) claimEach(d directive, passes []int) (inlineValue, error) {
	if show := d.arg("show", "none"); show != "none" {
		return inlineValue{}, d.errorf("a claim over several passes shows no one figure: write show=none")
	}
	var titles []string
	class := "figure claim"
	for _, n := range passes {
		one := d
		one.Args = maps.Clone(d.Args)
		one.Args["stat"] = fmt.Sprintf("pass%d", n)
		one.Args["show"] = "none"
		v, err := b.claim(one)
		if err != nil {
			return inlineValue{}, err
		}
		titles = append(titles, fmt.Sprintf("pass %d: %s", n, strings.TrimPrefix(v.Title, "Checked when the book is built: ")))
		for _, c := range strings.Fields(v.Class) {
			if !slices.Contains(strings.Fields(class), c) {
				class += " " + c
			}
		}
	}
	return inlineValue{Title: "Checked when the book is built, pass by pass: " + strings.Join(titles, "; "), Class: class}, nil
}
