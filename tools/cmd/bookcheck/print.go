package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This file checks the book on paper and numbers its printed pages. The
// book prints from print.html and its volumes print-2.html, … (the book
// tool's page.go): a cover, the contents, then every chapter, each
// starting a new A4 sheet, with a page number at the foot of every sheet
// (style.css's @page). Chromium has no target-counter(), so the contents
// cannot number themselves; instead, for each print page in order, this
// check
//
//  1. lays the page out as print media at the printable width (A4 less
//     the @page margins: printWidth CSS px) and fails on every table wider
//     than that, naming the page and the table;
//  2. prints the front matter alone, then each chapter alone (the others
//     hidden), to PDF with Page.printToPDF, and counts each one's sheets:
//     since every chapter starts a sheet, it takes as many sheets alone as
//     in its volume;
//
// and then writes the numbers into the site it checked: each chapter's
// first page into print.html's contents (<span class="toc-page">), and
// into each later volume's <html> a counter-reset, so that its sheets go
// on from the last volume's. The numbered contents therefore live in the
// built site's print.html after a bookcheck run (CI runs one), not in the
// book tool's output alone.

// printWidth is A4's 210 mm less style.css's 14 mm side margins, in CSS px
// (96 per inch).
const printWidth = 688

// printPageRE matches the pages for printing.
var printPageRE = regexp.MustCompile(`^print(?:-([0-9]+))?\.html$`)

// printPages returns the print pages among pages, in print order.
func printPages(pages []string) []string {
	var out []string
	for _, p := range pages {
		if printPageRE.MatchString(p) {
			out = append(out, p)
		}
	}
	num := func(p string) int {
		n, _ := strconv.Atoi(printPageRE.FindStringSubmatch(p)[1])
		return n // print.html: 0
	}
	sort.Slice(out, func(a, b int) bool { return num(out[a]) < num(out[b]) })
	return out
}

// printTables measures every table of a page laid out for print, after
// the beforeprint event that a real print sends.
const printTables = `(() => {
  window.dispatchEvent(new Event('beforeprint')); // book.js opens what a printout shows
  const main = document.querySelector('main') || document.body;
  const avail = main.clientWidth;
  const out = { avail, wide: [], chapters: [...document.querySelectorAll('section.print-chapter')].map((s) => s.id) };
  const name = (t) => {
    const fig = t.closest('figure');
    const cap = fig && fig.querySelector(':scope > figcaption');
    if (cap) return cap.textContent.trim().replace(/\s+/g, ' ').slice(0, 90);
    let el = t.closest('.table-wrap') || t;
    for (; el; el = el.previousElementSibling || el.parentElement) {
      if (/^H[1-6]$/.test(el.tagName)) return 'after "' + el.textContent.replace(/^#/, '').trim().slice(0, 80) + '"';
      if (el === main) break;
    }
    return 'a table';
  };
  for (const t of main.querySelectorAll('table')) {
    const w = Math.max(t.scrollWidth, t.getBoundingClientRect().width);
    if (w > avail + 1) {
      const sec = t.closest('section.print-chapter');
      out.wide.push({ chapter: sec ? sec.id : '', table: name(t), width: Math.round(w) });
    }
  }
  return out;
})()`

// showOnly hides everything printed but the front matter (ID "") or the
// chapter whose section has id ID.
const showOnly = `((id) => {
  for (const s of document.querySelectorAll('section.print-chapter')) s.style.display = s.id === id ? '' : 'none';
  for (const s of document.querySelectorAll('.print-cover, .print-toc')) s.style.display = id === '' ? '' : 'none';
  return true;
})(ID)`

// printed is what the print check found and numbered.
type printed struct {
	problems []string
	start    map[string]int // chapter print id → its first page
	volStart map[string]int // print page → its first page number
	sheets   int            // in all
}

// printCheck checks and numbers the print pages (in print order).
func (t *tab) printCheck(ctx context.Context, base string, pages []string) (*printed, error) {
	out := &printed{start: map[string]int{}, volStart: map[string]int{}}
	next := 1
	for _, page := range pages {
		j := job{page: page, width: printWidth, scheme: "light", url: base + page}
		l := newListener()
		if err := t.load(ctx, j, l); err != nil {
			return nil, err
		}
		if err := t.call(ctx, "Emulation.setEmulatedMedia", map[string]any{"media": "print"}, nil); err != nil {
			return nil, err
		}
		raw, err := t.eval(ctx, printTables)
		if err != nil {
			return nil, err
		}
		var m struct {
			Avail int `json:"avail"`
			Wide  []struct {
				Chapter string `json:"chapter"`
				Table   string `json:"table"`
				Width   int    `json:"width"`
			} `json:"wide"`
			Chapters []string `json:"chapters"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		for _, w := range m.Wide {
			out.problems = append(out.problems, fmt.Sprintf("%s printed: the table %q in %s is %d px wide, the printed page %d px", page, w.Table, w.Chapter, w.Width, m.Avail))
		}
		out.volStart[page] = next
		parts := m.Chapters
		if page == pages[0] {
			parts = append([]string{""}, parts...) // the cover and the contents first
		}
		for _, id := range parts {
			quoted, _ := json.Marshal(id)
			if _, err := t.eval(ctx, strings.Replace(showOnly, "ID", string(quoted), 1)); err != nil {
				return nil, err
			}
			n, err := t.printedSheets(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: printing %q: %w", page, id, err)
			}
			if id == "" {
				next += n
				continue
			}
			out.start[id] = next
			next += n
		}
		t.drain(l)
		for _, p := range l.problems {
			out.problems = append(out.problems, page+" printed: "+p)
		}
	}
	out.sheets = next - 1
	return out, nil
}

// pdfPageRE matches a page object of a PDF (not the /Pages tree).
var pdfPageRE = regexp.MustCompile(`/Type\s*/Page[^s]`)

// printedSheets prints the tab's page to PDF as style.css's @page asks
// and counts the sheets; an empty print (everything hidden) is one blank
// sheet, counted as none.
func (t *tab) printedSheets(ctx context.Context) (int, error) {
	var pdf struct {
		Data string `json:"data"`
	}
	if err := t.call(ctx, "Page.printToPDF", map[string]any{"preferCSSPageSize": true, "printBackground": false}, &pdf); err != nil {
		return 0, err
	}
	data, err := base64.StdEncoding.DecodeString(pdf.Data)
	if err != nil {
		return 0, err
	}
	n := len(pdfPageRE.FindAll(data, -1))
	if n == 0 {
		return 0, fmt.Errorf("the PDF has no pages")
	}
	return n, nil
}

var (
	tocPageRE = regexp.MustCompile(`<span class="toc-page" data-print-id="([^"]*)">[^<]*</span>`)
	htmlTagRE = regexp.MustCompile(`<html lang="en"[^>]*>`)
)

// number writes the page numbers into the site's print pages: the
// contents of the first, and a counter-reset into every later one.
func (p *printed) number(site string, pages []string) error {
	for i, page := range pages {
		file := filepath.Join(site, filepath.FromSlash(page))
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		s := string(data)
		if i == 0 {
			s = tocPageRE.ReplaceAllStringFunc(s, func(m string) string {
				id := tocPageRE.FindStringSubmatch(m)[1]
				n := ""
				if start, ok := p.start[id]; ok {
					n = strconv.Itoa(start)
				}
				return `<span class="toc-page" data-print-id="` + id + `">` + n + `</span>`
			})
		} else {
			s = htmlTagRE.ReplaceAllString(s, fmt.Sprintf(`<html lang="en" style="counter-reset: page %d">`, p.volStart[page]-1))
		}
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}
