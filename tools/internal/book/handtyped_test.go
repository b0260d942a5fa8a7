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
		"```\n40 ns\n```\nA 4 KiB page, stage 3, [link](x.md#a-1ms) 2026-12-01.\n"
	var got []string
	for _, h := range handTypedFigures(src) {
		got = append(got, fmt.Sprintf("%d:%s", h.line, h.text))
	}
	want := []string{"3:132 against 122 ns", "3:about 50 µs", "3:3.0×", "3:15 %", "4:tens of microseconds"}
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

// handTypedFigures returns the hand-typed measurements of a chapter.
func handTypedFigures(src string) []handTyped {
	var out []handTyped
	fence := false
	for i, line := range strings.Split(src, "\n") {
		if fenceOpen.MatchString(line) {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		s := directiveRE.ReplaceAllString(line, "")
		s = codeSpanRE.ReplaceAllString(s, "")
		s = linkDestRE.ReplaceAllString(s, "]")
		for _, m := range handTypedRE.FindAllStringSubmatch(s, -1) {
			out = append(out, handTyped{i + 1, m[1]})
		}
		for _, m := range magnitudeRE.FindAllString(s, -1) {
			out = append(out, handTyped{i + 1, m})
		}
	}
	return out
}
