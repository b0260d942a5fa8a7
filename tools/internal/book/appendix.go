package book

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file implements {{#records-appendix}}: every record under
// book/records, each with what a reader needs to judge and re-make it —
// machine, date, commit (flagged when the tree was modified), passes kept,
// rows re-run because their canary moved, how many rows are noisy — and its
// command in a code block of its own with a copy button. The command is
// never put in a table cell: a -bench regexp holds '|', which would split
// the cell. Each record's heading has the id record-NAME, so a chapter can
// link to appendix.md#record-NAME; on the print pages the id takes the
// chapter's prefix, as a heading's does, since that is what such a link is
// rewritten to there (markdown.go).

// recordsAppendix renders {{#records-appendix [noisy=]}}; prefix leads to
// the site root, idPrefix goes before each record's id.
func (b *builder) recordsAppendix(d directive, prefix, idPrefix string) (string, error) {
	if err := d.allow("noisy"); err != nil {
		return "", err
	}
	noisy, err := parseNoisy(d)
	if err != nil {
		return "", err
	}
	paths, err := filepath.Glob(filepath.Join(b.records.dir, "*.json"))
	if err != nil {
		return "", d.errorf("%v", err)
	}
	if len(paths) == 0 {
		return "", d.errorf("no records in %s", b.records.dir)
	}
	sort.Strings(paths)
	var out strings.Builder
	out.WriteString(b.editionSummary(paths, noisy))
	out.WriteString(`<div class="records-appendix">` + "\n")
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		rec, err := b.records.get(name)
		if err != nil {
			return "", d.errorf("%v", err)
		}
		entry := strings.TrimSuffix(recordEntry(rec, prefix, idPrefix, noisy), "</section>\n")
		out.WriteString(entry + b.staleNote(rec) + "</section>\n")
	}
	out.WriteString("</div>")
	return out.String(), nil
}

// recordEntry is one record's section of the appendix.
func recordEntry(rec *records.Record, prefix, idPrefix string, noisy float64) string {
	var b strings.Builder
	id := idPrefix + "record-" + rec.Name
	fmt.Fprintf(&b, `<section class="record-entry">`+"\n"+`<h3 id="%s"><a class="anchor" href="#%s" aria-label="Link to this record">#</a><a href="%s">%s</a></h3>`+"\n",
		escapeHTML(id), escapeHTML(id), escapeHTML(prefix+"records/"+rec.Name+".json"), escapeHTML(rec.Name+".json"))
	b.WriteString(`<dl class="record-facts">` + "\n")
	fact := func(term, html string) {
		if html != "" {
			b.WriteString("<dt>" + term + "</dt><dd>" + html + "</dd>\n")
		}
	}
	fact("machine", escapeHTML(machineDescription(rec)+goSuffix(rec)))
	fact("date", escapeHTML(shortDate(rec.Date)))
	commit := ""
	if rec.Commit != "" {
		commit = "<code>" + escapeHTML(shortCommit(rec.Commit)) + "</code>"
	}
	if recordDirty(rec) {
		commit += " " + dirtyFlag(rec)
	}
	fact("commit", commit)
	if rec.Transcribed {
		fact("source", escapeHTML(rec.Source))
	} else {
		passes := strconv.Itoa(acceptedPasses(rec))
		if rec.Rejected > 0 {
			passes += fmt.Sprintf(" (and %d rejected by the pass-level canary gate of schema 1)", rec.Rejected)
		}
		fact("passes kept", passes)
		rows := len(rec.Rows) + len(rec.Limits)
		if rec.Schema >= 2 {
			unsteady := 0
			for _, rs := range [][]records.Row{rec.Rows, rec.Limits} {
				for _, r := range rs {
					if r.Unsteady {
						unsteady++
					}
				}
			}
			s := fmt.Sprintf("%d of %d, because the canary moved during the row (tolerance %s)", rec.RowsRerun, rows, percent(rec.CanaryTolerance()-1))
			if unsteady > 0 {
				s += fmt.Sprintf("; %d kept a pass whose canary never held still", unsteady)
			}
			fact("rows re-run", escapeHTML(s))
		}
		n, counted := noisyRows(rec, noisy)
		if counted > 0 {
			fact("noisy rows", escapeHTML(fmt.Sprintf("%d of %d: (max − min)/median of the time or rate over %s", n, counted, percent(noisy))))
		}
		if steady, counted, wake := steadyShare(rec, noisy); counted > 0 || wake > 0 {
			s := "no row outside the wake-state families has a spread"
			if counted > 0 {
				s = fmt.Sprintf("%s (%d of %d rows outside the wake-state families) within %s", percent(float64(steady)/float64(counted)), steady, counted, percent(noisy))
			}
			if wake > 0 {
				s += fmt.Sprintf("; %d %s of wake-state families left out, compared only in paired families", wake, plural(wake, "row", "rows"))
			}
			fact("steady rows", escapeHTML(s))
		}
		if rec.Settings.Benchtime != "" {
			fact("benchtime", "<code>"+escapeHTML(rec.Settings.Benchtime)+"</code> per row and pass")
		}
		if len(rec.Settings.Env) > 0 {
			var env []string
			for _, e := range rec.Settings.Env {
				env = append(env, "<code>"+escapeHTML(e)+"</code>")
			}
			fact("environment", strings.Join(env, " "))
		}
	}
	b.WriteString("</dl>\n")
	if rec.Command != "" {
		b.WriteString(preOpen("chroma command-block", "", "shell") + escapeHTML(rec.Command) + "</code></pre>\n")
	}
	if rec.Notes != "" {
		b.WriteString(`<p class="record-notes">` + escapeHTML(rec.Notes) + "</p>\n")
	}
	b.WriteString("</section>\n")
	return b.String()
}

func goSuffix(rec *records.Record) string {
	if rec.Machine.Go != "" {
		return ", " + rec.Machine.Go
	}
	return ""
}

// noisyRows counts the rows whose headline metric — time per op, else a
// rate, else the first — spreads more than threshold, and the rows with a
// spread to judge.
func noisyRows(rec *records.Record, threshold float64) (noisy, counted int) {
	for _, rs := range [][]records.Row{rec.Rows, rec.Limits} {
		for _, r := range rs {
			if len(r.Metrics) == 0 {
				continue
			}
			unit := r.Metrics[0].Unit
			for _, u := range []string{"B/s", "ns/op"} {
				if _, ok := r.Metric(u); ok {
					unit = u
				}
			}
			f, _ := rowFigure(r, unit, "median")
			if !f.hasSpread() {
				continue
			}
			counted++
			if f.noisy(threshold) {
				noisy++
			}
		}
	}
	return noisy, counted
}

// editionSummary is the paragraph heading the list: over the records of
// this edition (not transcriptions, not "before" editions), the share of
// rows outside the wake-state families whose passes spread at most noisy,
// against the 90 % the project holds to, and how many records are stale.
func (b *builder) editionSummary(paths []string, noisy float64) string {
	var steady, counted, wake, stale, recs, atFloor, floorCounted int
	for _, p := range paths {
		rec, err := b.records.get(strings.TrimSuffix(filepath.Base(p), ".json"))
		if err != nil || rec.Transcribed {
			continue
		}
		if _, before := beforeEdition(rec); before {
			continue
		}
		recs++
		s, c, w := steadyShare(rec, noisy)
		steady, counted, wake = steady+s, counted+c, wake+w
		fw, fc := floorShare(rec)
		atFloor, floorCounted = atFloor+fw, floorCounted+fc
		if b.stale.of(rec).stale() {
			stale++
		}
	}
	if counted == 0 {
		return ""
	}
	share := float64(steady) / float64(counted)
	verdict := "meets"
	if share < steadyTarget {
		verdict = "falls short of"
	}
	floor := ""
	if floorCounted > 0 {
		floor = fmt.Sprintf(" Held instead to this machine's own floor, a spread no wider than that of the bare ping-pong (<code>Baseline/pingpong</code>) its stage's binary measured in the same record, %s of the rows are (%d of %d, in the records that measured it).",
			escapeHTML(percent(float64(atFloor)/float64(floorCounted))), atFloor, floorCounted)
	}
	return fmt.Sprintf(`<p class="edition-summary">Over the %d measured %s of this edition, %s of the rows outside the wake-state families (%d of %d) spread by at most %s over their passes, which %s the %s the project holds to; the %d rows of wake-state families are left out and compared only in paired families.%s %d of the %d %s stale: taken before later changes to the code they measured (listed under each).</p>`+"\n",
		recs, plural(recs, "record", "records"), escapeHTML(percent(share)), steady, counted, escapeHTML(percent(noisy)), verdict, escapeHTML(percent(steadyTarget)), wake, floor, stale, recs, plural(recs, "is", "are"))
}

// steadyTarget is the share of steady rows (outside the wake-state
// families) an edition's records are held to (issue 38, item 6).
const steadyTarget = 0.90
