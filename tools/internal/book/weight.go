package book

import (
	"fmt"
	"sort"
	"strings"
)

// This file keeps every page of the site light enough for a phone's tab:
// no HTML page may weigh more than maxPageBytes. A stage diff too long for
// one page is cut into parts at file boundaries (diffPages, diff.go), and
// print.html into volumes at chapter boundaries (printPages, page.go); the
// build fails on any page still over the limit (checkWeight), naming it.
//
// Invariant, checked by checkWeight after every build:
//
//	for every page p ending in .html: len(site.Files[p]) <= maxPageBytes

// maxPageBytes is the heaviest page the book may have: 1 MB.
const maxPageBytes = 1_000_000

// diffPartBudget and printVolumeBudget bound a part's content, leaving room
// under maxPageBytes for the page around it (the sidebar, the table of a
// diff's files, a volume's contents). Variables only so that a test can cut
// the small fixture book into parts.
var (
	diffPartBudget    = 850_000
	printVolumeBudget = 850_000
)

// packParts cuts blocks, in order, into as few consecutive runs as keep
// each run's total size within budget, and among those cuts the most even
// one (no tiny last volume); a block bigger than budget gets a run of its
// own (and checkWeight will name its page). It returns each run's block
// indices.
func packParts(blocks []string, budget int) [][]int {
	want := len(greedyParts(blocks, budget))
	lo, hi := 0, budget // the smallest budget that still gives want runs
	for _, blk := range blocks {
		lo = max(lo, len(blk))
	}
	lo = min(lo, budget)
	for lo < hi {
		mid := (lo + hi) / 2
		if len(greedyParts(blocks, mid)) <= want {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return greedyParts(blocks, hi)
}

// greedyParts fills each run with blocks until the next would take it over
// budget.
func greedyParts(blocks []string, budget int) [][]int {
	var parts [][]int
	size := 0
	for i, blk := range blocks {
		if len(parts) == 0 || size+len(blk) > budget && size > 0 {
			parts = append(parts, nil)
			size = 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], i)
		size += len(blk)
	}
	if len(parts) == 0 {
		parts = [][]int{nil}
	}
	return parts
}

// partPageName is the site path of part k (from 0) of page: page itself,
// then page-2.html, page-3.html, ….
func partPageName(page string, k int) string {
	if k == 0 {
		return page
	}
	return fmt.Sprintf("%s-%d.html", strings.TrimSuffix(page, ".html"), k+1)
}

// ErrPageTooHeavy is wrapped by the error of a page over maxPageBytes.
var ErrPageTooHeavy = fmt.Errorf("page over %d bytes", maxPageBytes)

// checkWeight returns an error naming every HTML page over maxPageBytes.
func checkWeight(files map[string][]byte) []error {
	var heavy []string
	for name, data := range files {
		if strings.HasSuffix(name, ".html") && len(data) > maxPageBytes {
			heavy = append(heavy, name)
		}
	}
	sort.Strings(heavy)
	var errs []error
	for _, name := range heavy {
		errs = append(errs, fmt.Errorf("book: %s weighs %d bytes: %w (1 MB; a phone's tab struggles with more): cut it, or put what makes it heavy on a page of its own", name, len(files[name]), ErrPageTooHeavy))
	}
	return errs
}
