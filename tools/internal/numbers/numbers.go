// Package numbers keeps the figures in the READMEs the records' own.
//
// A README quotes measured figures in a table (each stage's "Numbers"
// section). Typed by hand, such a table outlives the records it was copied
// from: re-take the records and the README still quotes the last edition,
// its commit and its machine. So the README names only the rows, in an HTML
// comment GitHub does not show, and this package writes the table and the
// sentence above it (which records, which commit, which machine, how many
// passes) from book/records:
//
//	<!-- numbers: the table below is written by go run ./tools/cmd/numbers
//	`Baseline/pingpong` | stages | stage0-mailbox | Baseline/pingpong | ns/op
//	`RoundTrip/engine=copy` | stages | stage0-mailbox | RoundTrip/engine=copy | ns/op, cores
//	-->
//	(generated: a sentence and the table)
//	<!-- end numbers -->
//
// Each spec line is label | record | stage | benchmark | units: the label
// is the row's first cell (Markdown), record a file in book/records, and
// the units the metrics shown, each as the median of the record's passes
// beside the lowest and highest pass. Lines starting with # are comments.
// Everything between the spec's "-->" and "<!-- end numbers -->" belongs
// to the generator: edit the spec, not the table.
//
// go run ./tools/cmd/numbers rewrites every README's tables; -check
// only reports the stale ones, and a test in this package fails while any
// README's table is not what the records give.
package numbers

import (
	"fmt"
	"slices"
	"strings"

	"softgpu/tools/internal/book"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/wrap"
)

const (
	openMark  = "<!-- numbers"
	specEnd   = "-->"
	closeMark = "<!-- end numbers -->"
)

// Row is one spec line: a row of the table and where its figures come from.
type Row struct {
	Line   int // 1-based line of the spec in the README, for errors
	Label  string
	Record string
	Stage  string
	Bench  string
	Units  []string
}

// Block is one generated table of a README: its spec, and the lines the
// generator owns.
type Block struct {
	Rows  []Row
	first int // index of the first generated line (the one after the spec's "-->")
	end   int // index of the closing marker's line
}

// Parse finds every block in a README's text. A block whose spec is
// malformed or that is never closed is an error naming its line.
func Parse(text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), openMark) {
			continue
		}
		open := i + 1
		var b Block
		i++
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != specEnd; i++ {
			line := strings.TrimSpace(lines[i])
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			row, err := parseRow(line, i+1)
			if err != nil {
				return nil, err
			}
			b.Rows = append(b.Rows, row)
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the numbers spec is never closed by a line %q", open, specEnd)
		}
		if len(b.Rows) == 0 {
			return nil, fmt.Errorf("line %d: the numbers spec names no row", open)
		}
		b.first = i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != closeMark; i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), openMark) {
				return nil, fmt.Errorf("line %d: a numbers block opens inside the one opened at line %d", i+1, open)
			}
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: the numbers block is never closed by %q", open, closeMark)
		}
		b.end = i
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// parseRow reads "label | record | stage | benchmark | unit, unit".
func parseRow(line string, n int) (Row, error) {
	f := strings.Split(line, "|")
	if len(f) != 5 {
		return Row{}, fmt.Errorf("line %d: want label | record | stage | benchmark | units, got %d field(s): %q", n, len(f), line)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
		if f[i] == "" {
			return Row{}, fmt.Errorf("line %d: field %d is empty: %q", n, i+1, line)
		}
	}
	r := Row{Line: n, Label: f[0], Record: f[1], Stage: f[2], Bench: f[3]}
	for _, u := range strings.Split(f[4], ",") {
		if u = strings.TrimSpace(u); u == "" {
			return Row{}, fmt.Errorf("line %d: an empty unit in %q", n, f[4])
		}
		r.Units = append(r.Units, u)
	}
	return r, nil
}

// Update returns text with every block's table written from recs.
func Update(text string, recs map[string]*records.Record) (string, error) {
	blocks, err := Parse(text)
	if err != nil {
		return "", err
	}
	lines := strings.Split(text, "\n")
	var out []string
	last := 0
	for _, b := range blocks {
		gen, err := Render(b.Rows, recs)
		if err != nil {
			return "", err
		}
		out = append(out, lines[last:b.first]...)
		out = append(out, "")
		out = append(out, strings.Split(gen, "\n")...)
		out = append(out, "")
		last = b.end
	}
	out = append(out, lines[last:]...)
	return strings.Join(out, "\n"), nil
}

// Render writes one block's generated text: the sentence that says where
// the figures come from, a blank line, and the table.
func Render(rows []Row, recs map[string]*records.Record) (string, error) {
	var used []*records.Record
	var cells [][3]string
	for _, r := range rows {
		rec, ok := recs[r.Record]
		if !ok {
			return "", fmt.Errorf("line %d: no record %q in book/records", r.Line, r.Record)
		}
		if rec.Transcribed || rec.Commit == "" {
			return "", fmt.Errorf("line %d: record %q is a transcription, not a measurement of this tree: quote it in the book, beside this machine's figures", r.Line, r.Record)
		}
		row, ok := rec.Find(r.Stage, r.Bench)
		if !ok {
			return "", fmt.Errorf("line %d: record %q has no row %s %s", r.Line, r.Record, r.Stage, r.Bench)
		}
		var med, span []string
		for _, u := range r.Units {
			m, ok := row.Metric(u)
			if !ok {
				have := make([]string, 0, len(row.Metrics))
				for _, m := range row.Metrics {
					have = append(have, m.Unit)
				}
				return "", fmt.Errorf("line %d: %s %s in record %q has no metric %q (it has %s)", r.Line, r.Stage, r.Bench, r.Record, u, strings.Join(have, ", "))
			}
			med = append(med, book.FormatValue(m.Median, u)+kindOf(u))
			span = append(span, formatRange(m.Min, m.Max, u)+kindOf(u))
		}
		cells = append(cells, [3]string{r.Label, strings.Join(med, "; "), strings.Join(span, "; ")})
		if !slices.Contains(used, rec) {
			used = append(used, rec)
		}
	}
	var b strings.Builder
	b.WriteString(wrapParagraph(provenance(used), 72))
	b.WriteString("\n\n| row | median | passes (min–max) |\n|---|---|---|\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c[0], c[1], c[2])
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// kindOf is what a figure in unit u is, when its formatted value alone
// does not say: a custom metric named WHAT-ns, WHAT-ratio or WHAT-share
// prints as a time, a quotient or a share like any other, so "4.31 µs"
// could be read as the row's ns/op where it is its p99-ns. It returns
// " (WHAT)" for those, and "" for a unit whose value reads as itself
// (ns/op, B/s, cores, allocs/op, irqs/op, ratio).
func kindOf(u string) string {
	if i := strings.LastIndex(u, "-"); i > 0 && !strings.Contains(u, "/") {
		return " (" + u[:i] + ")"
	}
	return ""
}

// provenance says which records the figures come from, at which commit,
// on which machine, with which settings, and what each figure is.
func provenance(used []*records.Record) string {
	names := make([]string, len(used))
	for i, r := range used {
		names[i] = "`" + r.Name + "`"
	}
	noun := "the record "
	if len(used) > 1 {
		noun = "the records "
	}
	s := "From " + noun + andList(names) + " (`book/records/`), "

	// One phrase per commit and machine, in the order the records first
	// appear: an edition's records share both, and then it is one phrase.
	type where struct{ commit, machine string }
	var order []where
	groups := map[where][]string{}
	for _, r := range used {
		w := where{short(r.Commit), machine(r.Machine)}
		if r.Dirty {
			w.commit += " with uncommitted changes"
		}
		if _, ok := groups[w]; !ok {
			order = append(order, w)
		}
		groups[w] = append(groups[w], "`"+r.Name+"`")
	}
	var phrases []string
	for _, w := range order {
		p := fmt.Sprintf("taken at commit `%s` on %s", w.commit, w.machine)
		if len(order) > 1 {
			p = andList(groups[w]) + " " + p
		}
		phrases = append(phrases, p)
	}
	s += strings.Join(phrases, "; ") + " with `go run ./tools/cmd/record`"

	var env []string
	for _, r := range used {
		if len(r.Settings.Env) > 0 {
			env = append(env, fmt.Sprintf("`%s` with `%s`", r.Name, strings.Join(r.Settings.Env, " ")))
		}
	}
	if len(env) > 0 {
		s += " (" + strings.Join(env, ", ") + ")"
	}

	passes := used[0].Settings.Passes
	for _, r := range used[1:] {
		if r.Settings.Passes != passes {
			passes = 0
		}
	}
	switch passes {
	case 0:
		s += "; each figure is the median of its record's passes"
	case 1:
		s += "; one pass, so each figure is that pass's"
		return s + "."
	default:
		s += fmt.Sprintf("; each figure is the median of %d passes", passes)
	}
	return s + ", beside the lowest and highest pass."
}

// machine describes where a record was taken, as a reader would say it.
func machine(m records.Machine) string {
	s := fmt.Sprintf("a %d-core %s machine", m.Cores, m.CPU)
	var sw []string
	if m.OS != "" {
		sw = append(sw, strings.TrimSpace(m.OS+" "+m.Kernel))
	}
	if m.Go != "" {
		sw = append(sw, m.Go)
	}
	if len(sw) > 0 {
		s += " (" + strings.Join(sw, ", ") + ")"
	}
	return s
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// andList joins "a", "a and b", "a, b and c".
func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// formatRange writes the lowest and highest pass as the book writes a
// figure: "112–134 ns" when both carry the same suffix, "419 ns – 1.09 µs"
// when they do not, "1.01×–1.07×" for a bare quotient.
func formatRange(lo, hi float64, unit string) string {
	a, b := book.FormatValue(lo, unit), book.FormatValue(hi, unit)
	if a == b {
		return a
	}
	ia, ib := strings.LastIndex(a, " "), strings.LastIndex(b, " ")
	switch {
	case ia >= 0 && ib >= 0 && a[ia:] == b[ib:]:
		return a[:ia] + "–" + b
	case ia < 0 && ib < 0:
		return a + "–" + b
	}
	return a + " – " + b
}

// wrapParagraph breaks a paragraph into lines of at most width columns where it
// can, between words, never inside a code span (`go run ./tools/cmd/record`
// stays on one line, as a reader would copy it); a word or span longer
// than width stands on its own line.
func wrapParagraph(s string, width int) string {
	return strings.Join(wrap.Words(spans(s), width), "\n")
}

// spans splits s into words at spaces, keeping each code span whole.
func spans(s string) []string {
	var out []string
	open := false // inside a code span
	for _, w := range strings.Fields(s) {
		if open {
			out[len(out)-1] += " " + w
		} else {
			out = append(out, w)
		}
		if strings.Count(w, "`")%2 == 1 {
			open = !open
		}
	}
	return out
}
