package book

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestNoHandTypedFigures scans the book's chapters for a measurement typed
// into prose by hand — a number with a unit of time, bandwidth, a multiple
// or a percentage, or "tens of microseconds" and the like — outside the
// directives that take figures from records ({{#value}}, {{#claim}}, ...),
// code spans and code blocks. What it finds must become a figure from a
// record, or be reworded, or be a non-measurement listed in
// handTypedAllowed with the reason it is not a measurement.
func TestNoHandTypedFigures(t *testing.T) {
	chapters, err := filepath.Glob(filepath.Join("..", "..", "..", "book", "*.md"))
	if err != nil || len(chapters) == 0 {
		t.Skipf("no book beside the tools (%v)", err)
	}
	var found []string
	used := map[string]bool{}
	for _, path := range chapters {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Base(path)
		for _, h := range handTypedFigures(string(src)) {
			key := file + ": " + h.text
			if _, ok := handTypedAllowed[key]; ok {
				used[key] = true
				continue
			}
			found = append(found, fmt.Sprintf("book/%s:%d: %q", file, h.line, h.text))
		}
	}
	if len(found) > 0 {
		t.Errorf("%d hand-typed figures: take each from a record ({{#value}}, {{#claim}}), reword it, or allow it below with the reason it is not a measurement:\n%s", len(found), strings.Join(found, "\n"))
	}
	var stale []string
	for key := range handTypedAllowed {
		if !used[key] {
			stale = append(stale, key)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("allowed figures no chapter has any more (drop them from handTypedAllowed):\n%s", strings.Join(stale, "\n"))
	}
}

func TestHandTypedFiguresScanner(t *testing.T) {
	src := "# T\n\nIt took 132 against 122 ns, about 50 µs, 3.0× and 15 %,\n" +
		"tens of microseconds, {{#value record=r stage=s bench=b unit=ns/op}} and `12 ns`.\n" +
		"```\n40 ns\n```\nA 4 KiB page, stage 3, [link](x.md#a-1ms) 2026-12-01.\n" +
		"\n- A wake is tens of\n  microseconds; it took 132 against\n122 ns, a `code\n5 ns` span, and 7\n" +
		"```\nms\n```\n## 9\nms\n" +
		"\n> A quote of about\n> 50 µs and 8\n>\n> ms.\n"
	var got []string
	for _, h := range handTypedFigures(src) {
		got = append(got, fmt.Sprintf("%d:%s", h.line, h.text))
	}
	// A figure a line break splits is still one figure, reported at the
	// line where it starts, whatever the next line's indentation (a list
	// item's) or quote marker; a code span may run over a line break too.
	// A fence, a heading or a blank line (in a quote too) ends a
	// paragraph, so "7", "9" and "8" do not take the "ms" after them.
	want := []string{"3:132 against 122 ns", "3:about 50 µs", "3:3.0×", "3:15 %", "4:tens of microseconds",
		"10:tens of microseconds", "11:132 against 122 ns", "20:about 50 µs"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("handTypedFigures = %q; want %q", got, want)
	}
}

type handTyped struct {
	line int
	text string
}

var (
	figureUnit   = `(?:ns|µs|us|ms|s|GB/s|MB/s|KB/s|B/s|×|x|%|cores?)`
	figureNumber = `\d+(?:[.,]\d+)*`
	figurePrefix = `(?:~|about |some |over |under |nearly )?`
	handTypedRE  = regexp.MustCompile(`(?:^|[^\w.#/-])(` + `(?:` + figurePrefix + figureNumber + ` (?:against|and|to|or|vs\.?) )?` +
		figurePrefix + figureNumber + `(?:\s|&nbsp;)?(?:–` + figureNumber + `\s?)?` + figureUnit + `)(?:[^\w/]|$)`)
	magnitudeRE = regexp.MustCompile(`(?i)\b(?:tens|hundreds|thousands) of (?:nano|micro|milli)?seconds\b`)
	directiveRE = regexp.MustCompile(`\{\{#.*?\}\}`)
	codeSpanRE  = regexp.MustCompile("`[^`]*`")
	linkDestRE  = regexp.MustCompile(`\]\([^)]*\)`)
)

// handTypedFigures returns the hand-typed measurements of a chapter. It
// reads each paragraph — a run of lines that a blank line (a bare ">" in
// a quote), a fence or a heading ends — as one string, so that a figure
// a line break splits ("tens of" / "microseconds") is found, and reports
// the line where the figure starts. Fenced blocks are skipped.
func handTypedFigures(src string) []handTyped {
	var out []handTyped
	var para []string // the lines of the paragraph being read
	first := 0        // 1-based line of para[0]
	flush := func() {
		if len(para) > 0 {
			out = append(out, paragraphFigures(strings.Join(para, "\n"), first)...)
		}
		para = nil
	}
	fence := false
	for i, line := range strings.Split(src, "\n") {
		// A quote's markers, a line's indentation and its trailing spaces
		// are not prose, and would keep "tens of" from "microseconds" on
		// the next line.
		text := strings.TrimSpace(quoteMarkers.ReplaceAllString(line, ""))
		switch {
		case fenceOpen.MatchString(line):
			flush()
			fence = !fence
		case fence:
		case text == "":
			flush()
		case headingRE.MatchString(line):
			flush()
			out = append(out, paragraphFigures(line, i+1)...)
		default:
			if len(para) == 0 {
				first = i + 1
			}
			para = append(para, text)
		}
	}
	flush()
	return out
}

// quoteMarkers are the block quote markers that open a line.
var quoteMarkers = regexp.MustCompile(`^ {0,3}(?:> ?)+`)

// headingRE is an ATX heading line, a paragraph of its own.
var headingRE = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s|$)`)

// paragraphFigures returns the hand-typed measurements of one paragraph
// whose first line is line first, in the order they appear.
func paragraphFigures(para string, first int) []handTyped {
	// What is not prose goes, but its line breaks stay, so that an offset
	// still tells its line.
	keepBreaks := func(with string) func(string) string {
		return func(m string) string { return with + strings.Repeat("\n", strings.Count(m, "\n")) }
	}
	s := directiveRE.ReplaceAllStringFunc(para, keepBreaks(""))
	s = codeSpanRE.ReplaceAllStringFunc(s, keepBreaks(""))
	s = linkDestRE.ReplaceAllStringFunc(s, keepBreaks("]"))
	// A line break inside a paragraph is a space; the swap keeps offsets.
	flat := strings.ReplaceAll(s, "\n", " ")
	type hit struct {
		at   int
		text string
	}
	var hits []hit
	for _, m := range handTypedRE.FindAllStringSubmatchIndex(flat, -1) {
		hits = append(hits, hit{m[2], flat[m[2]:m[3]]})
	}
	for _, m := range magnitudeRE.FindAllStringIndex(flat, -1) {
		hits = append(hits, hit{m[0], flat[m[0]:m[1]]})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	var out []handTyped
	for _, h := range hits {
		out = append(out, handTyped{first + strings.Count(s[:h.at], "\n"), h.text})
	}
	return out
}
