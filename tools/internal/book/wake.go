package book

import (
	"fmt"
	"strings"

	"softgpu/tools/internal/records"
)

// This file keeps the book from drawing conclusions from rows whose
// medians move with the machine's wake-up state. How long a sleeping
// thread takes to come back depends on how deeply its vCPU was idle, which
// changes from second to second; two such rows measured one after the
// other can differ by the machine alone. They are compared only in paired
// families, whose benchmark measures both sides in turns within one run
// (IdleMixPaired) and reports the ratio itself.
//
// A {{#ratio}} or {{#claim}} whose two sides are both rows of a
// wake-state family is marked "unpaired" where it is printed, and the page
// ends with a note that the book draws no conclusion from it alone. The
// records appendix leaves these rows out of the share of steady rows,
// which is the share the project holds to 90 % (issue 38).

// wakeFamilies are the benchmark families whose medians move with the
// machine's wake-up state.
var wakeFamilies = map[string]bool{
	"IdleGap": true, "IdleMix": true, "IdleWake": true, "Gap": true,
	"FenceSignal": true, "SpinYield": true, "Trace": true,
}

// wakeFamily reports whether row belongs to a wake-state family: its
// benchmark's first name element is one of wakeFamilies.
func wakeFamily(row records.Row) bool {
	family, _, _ := strings.Cut(row.Benchmark, "/")
	return wakeFamilies[family]
}

// unpairedNote is what a marked comparison's tooltip adds.
const unpairedNote = "unpaired: both rows move with the machine's wake-up state and were measured one after the other, not in turns, so this comparison alone supports no conclusion"

// markUnpaired marks v when a and b are both rows of wake-state families.
func (b *builder) markUnpaired(v *inlineValue, a, bo operand) {
	if !wakeFamily(a.row) || !wakeFamily(bo.row) {
		return
	}
	v.Class += " unpaired"
	v.Text += " (unpaired)"
	v.Title += "; " + unpairedNote
	b.unpairedShown++
}

// pageUnpairedNote closes a page that printed marked comparisons.
func (b *builder) pageUnpairedNote() string {
	if b.unpairedShown == 0 {
		return ""
	}
	return fmt.Sprintf(`<p class="unpaired-note">%d %s on this page %s marked <em>(unpaired)</em>: both rows of each move with the machine's wake-up state (families %s) and were measured one after the other, not in turns. The book draws no conclusion from such a comparison alone; the paired families, which measure both sides in turns, are the ones that can settle it.</p>`+"\n",
		b.unpairedShown, plural(b.unpairedShown, "comparison", "comparisons"), plural(b.unpairedShown, "is", "are"), "IdleGap, IdleMix, IdleWake, Gap, FenceSignal, SpinYield, Trace")
}

// steadyShare counts, over the rows of rec outside the wake-state
// families, those whose headline metric spreads at most threshold; wake
// counts the rows left out.
func steadyShare(rec *records.Record, threshold float64) (steady, counted, wake int) {
	for _, rs := range [][]records.Row{rec.Rows, rec.Limits} {
		for _, r := range rs {
			if len(r.Metrics) == 0 {
				continue
			}
			if wakeFamily(r) {
				wake++
				continue
			}
			f, _ := rowFigure(r, headlineUnit(r), "median")
			if !f.hasSpread() {
				continue
			}
			counted++
			if !f.noisy(threshold) {
				steady++
			}
		}
	}
	return steady, counted, wake
}

// floorShare holds each row outside the wake-state families to the
// machine's floor rather than to a fixed threshold: the spread of the bare
// ping-pong (Baseline/pingpong, one cache line between two goroutines, no
// device) that the row's own stage binary measured in the same record. A
// row that hands a line between cores cannot be steadier over its passes
// than that handoff alone, and on a virtual machine whose vCPU placement
// moves within seconds the handoff spreads far more than 15 %. Rows of a
// stage with no such measurement, and the ping-pong itself, are not
// counted.
func floorShare(rec *records.Record) (within, counted int) {
	floor := map[string]float64{}
	for _, r := range rec.Limits {
		if r.Benchmark == "Baseline/pingpong" && len(r.Metrics) > 0 {
			if f, _ := rowFigure(r, headlineUnit(r), "median"); f.hasSpread() {
				floor[r.Stage] = f.spread()
			}
		}
	}
	for _, rs := range [][]records.Row{rec.Rows, rec.Limits} {
		for _, r := range rs {
			fl, ok := floor[r.Stage]
			if !ok || len(r.Metrics) == 0 || wakeFamily(r) || r.Benchmark == "Baseline/pingpong" {
				continue
			}
			f, _ := rowFigure(r, headlineUnit(r), "median")
			if !f.hasSpread() {
				continue
			}
			counted++
			if f.spread() <= fl {
				within++
			}
		}
	}
	return within, counted
}

// headlineUnit is the metric a row is judged by: time per op, else a
// rate, else its first.
func headlineUnit(r records.Row) string {
	unit := r.Metrics[0].Unit
	for _, u := range []string{"B/s", "ns/op"} {
		if _, ok := r.Metric(u); ok {
			unit = u
		}
	}
	return unit
}
