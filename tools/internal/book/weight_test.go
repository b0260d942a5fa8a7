package book

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestPackParts(t *testing.T) {
	blocks := func(sizes ...int) []string {
		var out []string
		for _, n := range sizes {
			out = append(out, strings.Repeat("x", n))
		}
		return out
	}
	tests := []struct {
		name   string
		sizes  []int
		budget int
		want   string
	}{
		{"fits in one", []int{3, 3, 3}, 10, "[[0 1 2]]"},
		{"even, not greedy", []int{4, 4, 4, 1}, 9, "[[0 1] [2 3]]"},
		{"no tiny last part", []int{5, 2, 2, 5, 1}, 9, "[[0 1] [2 3 4]]"},
		{"a block over budget stands alone", []int{2, 20, 2}, 10, "[[0] [1] [2]]"},
		{"nothing", nil, 10, "[[]]"},
	}
	for _, tt := range tests {
		got := fmt.Sprint(packParts(blocks(tt.sizes...), tt.budget))
		if got != tt.want {
			t.Errorf("%s: packParts(%v, %d) = %s; want %s", tt.name, tt.sizes, tt.budget, got, tt.want)
		}
	}
}

func TestCheckWeight(t *testing.T) {
	files := map[string][]byte{
		"light.html":        []byte("<p>hi</p>"),
		"heavy.html":        make([]byte, maxPageBytes+1),
		"records/big.json":  make([]byte, 2*maxPageBytes), // not a page
		"diff/exact.html":   make([]byte, maxPageBytes),
		"diff/heavier.html": make([]byte, 3*maxPageBytes),
	}
	errs := checkWeight(files)
	if len(errs) != 2 {
		t.Fatalf("checkWeight = %v; want heavy.html and diff/heavier.html", errs)
	}
	for i, name := range []string{"diff/heavier.html", "heavy.html"} {
		if !strings.Contains(errs[i].Error(), name) || !errors.Is(errs[i], ErrPageTooHeavy) {
			t.Errorf("error %d = %v; want %s named, wrapping ErrPageTooHeavy", i, errs[i], name)
		}
	}
}

// TestPartsLinkAcross builds the fixture book with budgets small enough
// to put every chapter in a print volume of its own and cut its stage diff
// into a part per file: the contents and the links between chapters lead
// to the right volume, the diff's table to the right part, and no link
// breaks.
func TestPartsLinkAcross(t *testing.T) {
	defer func(d, p int) { diffPartBudget, printVolumeBudget = d, p }(diffPartBudget, printVolumeBudget)
	diffPartBudget, printVolumeBudget = 1, 1
	site := renderFixture(t)
	for _, l := range site.Broken {
		t.Errorf("broken link: %s", l)
	}
	page := func(name string) string { return string(site.Files[name]) }
	for _, tt := range []struct{ page, want string }{
		{printPage, `<a href="print-2.html#stage0">`},             // the contents: intro, stage0, details, stage1, records
		{printPage, `<a href="print-2.html#stage0--the-engine">`}, // intro's link to a section of stage0
		{printPage, `<a href="#intro">`},
		{printPage, `<a href="print-5.html#records--record-placed">`}, // intro's link into the records appendix
		{printPage, `<span class="toc-page" data-print-id="stage1"></span>`},
		{printPage, `<a href="print-2.html">volume 2</a>`},
		{"print-2.html", `<section class="print-chapter" id="stage0">`},
		{"print-2.html", `Volume 2 of 5`},
		{"print-2.html", `<a href="print-3.html#stage0-details--the-poll-loop">`},
		{"diff/stage1-ring.html", `<a href="stage1-ring-2.html">part 2</a>`},
		{"diff/stage1-ring-2.html", `<h1>The diff from <code>stage0-mailbox</code> to <code>stage1-ring</code>, part 2 of`},
		{"stage1.html", `diff/stage1-ring-2.html#diff-stage1-ring--`},
	} {
		if !strings.Contains(page(tt.page), tt.want) {
			t.Errorf("%s lacks %q", tt.page, tt.want)
		}
	}
}
