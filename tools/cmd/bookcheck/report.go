package main

import (
	"fmt"
	"html"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// report is every result, in job order.
type report struct {
	results      []pageResult
	interactions []string
	loads        int
}

func (r *report) failed() bool {
	for _, res := range r.results {
		if len(res.problems) > 0 {
			return true
		}
	}
	return len(r.interactions) > 0
}

func (r *report) String() string {
	var b strings.Builder
	bad := 0
	for _, res := range r.results {
		if len(res.problems) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(&b, "FAIL %s\n", res.job)
		for _, p := range res.problems {
			fmt.Fprintf(&b, "\t%s\n", p)
		}
	}
	for _, p := range r.interactions {
		fmt.Fprintf(&b, "FAIL %s\n", p)
	}
	if bad == 0 && len(r.interactions) == 0 {
		fmt.Fprintf(&b, "ok: %d checks: no page pans sideways, logs an error, fails a request, draws chart or diagram text too small, has a table whose numbers a phone hides or that is wider than the printed page, or fails an accessibility check; the sidebar and theme toggles work from the keyboard and search finds every chapter\n", len(r.results))
	} else {
		fmt.Fprintf(&b, "%d of %d loads failed; %d interaction problems\n", bad, len(r.results), len(r.interactions))
	}
	return b.String()
}

// writeGallery writes index.html in the screenshot folder: every page's
// screenshots side by side, failures first.
func writeGallery(dir string, results []pageResult) error {
	byPage := map[string][]pageResult{}
	var pages []string
	failed := map[string]bool{}
	for _, r := range results {
		if _, ok := byPage[r.job.page]; !ok {
			pages = append(pages, r.job.page)
		}
		byPage[r.job.page] = append(byPage[r.job.page], r)
		if len(r.problems) > 0 {
			failed[r.job.page] = true
		}
	}
	sort.SliceStable(pages, func(i, j int) bool { return failed[pages[i]] && !failed[pages[j]] })
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bookcheck screenshots</title>\n<style>body{font:14px system-ui,sans-serif;margin:1rem}section{margin:0 0 2rem}h2{font-size:1rem}.row{display:flex;gap:1rem;align-items:flex-start;overflow-x:auto}figure{margin:0}img{border:1px solid #ccc;max-height:600px}.fail{color:#b00020}</style></head><body>\n<h1>bookcheck screenshots</h1>\n")
	for _, p := range pages {
		class := ""
		if failed[p] {
			class = ` class="fail"`
		}
		fmt.Fprintf(&b, "<section><h2%s>%s</h2>\n", class, html.EscapeString(p))
		for _, r := range byPage[p] {
			for _, prob := range r.problems {
				fmt.Fprintf(&b, "<p class=\"fail\">%s: %s</p>\n", html.EscapeString(r.job.String()), html.EscapeString(prob))
			}
		}
		b.WriteString("<div class=\"row\">\n")
		for _, r := range byPage[p] {
			if r.shot != "" {
				fmt.Fprintf(&b, "<figure><a href=\"%s\"><img src=\"%s\" width=\"%d\" loading=\"lazy\" alt=\"%s\"></a><figcaption>%s</figcaption></figure>\n",
					html.EscapeString(r.shot), html.EscapeString(r.shot), min(r.job.width, 640)/2, html.EscapeString(r.job.String()), html.EscapeString(r.job.String()))
			}
		}
		b.WriteString("</div></section>\n")
	}
	b.WriteString("</body></html>\n")
	return os.WriteFile(filepath.Join(dir, "index.html"), []byte(b.String()), 0o644)
}
