package book

import (
	"fmt"
	"strings"

	"softgpu/tools/internal/records"
)

// This file writes what every table and chart ends with, so that a figure
// can always be traced and re-made: which statistic it shows and how its
// spread is written, the record it came from (linked; the record is copied
// into the site), and "Reproduce this:" with the record's command, commit,
// date and machine. A record made from a modified tree is flagged here and
// on every inline figure drawn from it.

// statNote says what the values of a table or chart are: "Median of 5
// passes; ± is half the range ..., noisy ...". spread says whether the
// figure shows a spread at all; noisy is the threshold in use.
func statNote(stat string, passes int, spread bool, noisy float64, what string) string {
	var b strings.Builder
	phrase := statPhrase(stat, passes)
	b.WriteString(strings.ToUpper(phrase[:1]) + phrase[1:])
	if spread && passes > 1 {
		switch what {
		case "chart":
			b.WriteString("; whiskers span the lowest to the highest pass")
		default:
			b.WriteString("; ± is half the range of the passes, as a share of the median, and a range wider than the median is printed as lowest–highest pass")
			fmt.Fprintf(&b, `; <span class="noisy-mark">noisy</span>: (max − min)/median over %s`, escapeHTML(percent(noisy)))
		}
	}
	b.WriteString(".")
	return `<p class="stat-note">` + b.String() + "</p>\n"
}

// provenance is the source and the reproduce line under a table or chart.
// ref, the comparison record, may be nil.
func (b *builder) provenance(prefix string, rec, ref *records.Record) string {
	var out strings.Builder
	out.WriteString(`<p class="source">Source: ` + recordCitation(prefix, rec))
	if ref != nil && ref != rec {
		out.WriteString("; reference: " + recordCitation(prefix, ref))
	}
	out.WriteString(".</p>\n")
	out.WriteString(reproduceLine(rec))
	out.WriteString(b.staleNote(rec))
	if ref != rec {
		out.WriteString(b.staleNote(ref))
	}
	return out.String()
}

// recordCitation names a record, linked, with its machine, date and commit.
func recordCitation(prefix string, r *records.Record) string {
	facts := []string{machineLabel(r)}
	if d := shortDate(r.Date); d != "" {
		facts = append(facts, d)
	}
	if r.Commit != "" {
		facts = append(facts, "commit "+shortCommit(r.Commit))
	} else if r.Source != "" {
		facts = append(facts, "from "+r.Source)
	}
	s := `record <a href="` + escapeHTML(prefix+"records/"+r.Name+".json") + `">` +
		escapeHTML(r.Name+".json") + "</a> (" + escapeHTML(strings.Join(facts, ", ")) + ")"
	if recordDirty(r) {
		s += " " + dirtyFlag(r)
	}
	return s
}

// dirtyFlag is the visible mark of a record made from a modified tree.
func dirtyFlag(r *records.Record) string {
	return `<strong class="dirty" title="` + escapeHTML(r.Name+".json was "+dirtyNote+": its commit does not hold the code it measured") + `">` + dirtyNote + `</strong>`
}

// reproduceLine is "Reproduce this: <command> at commit C (date, machine)",
// or for a transcription, where its figures were transcribed from.
func reproduceLine(r *records.Record) string {
	if r.Transcribed || r.Command == "" {
		if r.Source != "" {
			return `<p class="reproduce">Transcribed from ` + escapeHTML(r.Source) + ".</p>\n"
		}
		return ""
	}
	var facts []string
	if d := shortDate(r.Date); d != "" {
		facts = append(facts, d)
	}
	facts = append(facts, machineDescription(r))
	s := `<p class="reproduce">Reproduce this: <code class="command">` + escapeHTML(r.Command) + `</code>`
	if r.Commit != "" {
		s += ` at commit <code>` + escapeHTML(shortCommit(r.Commit)) + `</code>`
	}
	return s + " (" + escapeHTML(strings.Join(facts, "; ")) + ").</p>\n"
}

// machineDescription is "this machine: AMD EPYC 7B13, 2 cores, linux/amd64".
func machineDescription(r *records.Record) string {
	m := r.Machine
	var parts []string
	if m.CPU != "" {
		parts = append(parts, cpuText(m))
	}
	if m.OS != "" {
		parts = append(parts, osText(m))
	}
	if len(parts) == 0 {
		return machineLabel(r)
	}
	return machineLabel(r) + ": " + strings.Join(parts, ", ")
}
