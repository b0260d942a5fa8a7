package book

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"regexp"
	"strings"
)

// This file wraps rendered chapters in the page every chapter shares: the
// sidebar (search box, table of contents with the current chapter marked,
// links to the source pages and print.html), the "On this page" list of the
// chapter's headings, previous/next links (the script binds them to ← and
// →), and the pages for printing: print.html, a cover, a table of contents
// and the chapters in order, continued in volumes print-2.html, … when one
// page would weigh more than 1 MB.

//go:embed templates/page.html
var pageTemplateText string

var pageTemplate = template.Must(template.New("page").Parse(pageTemplateText))

type navLink struct {
	Href  string
	Title string
}

type pageData struct {
	BookTitle    string
	ChapterTitle string
	Root         string // from this page to the site root: "" or "../"
	Sidebar      template.HTML
	PageTOC      []heading
	Content      template.HTML
	Prev, Next   *navLink
	Print        bool
	Kind         string // body class: "chapter", "source" or "print"
}

// pager renders the pages of one book.
type pager struct {
	summary  *Summary
	title    string
	chapters []*chapter
	pages    map[string]string // chapter .md path → page path
}

func (p *pager) execute(data pageData) []byte {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, data); err != nil {
		panic("book: page template: " + err.Error()) // the template and its data are ours
	}
	return b.Bytes()
}

// fullTitle is a chapter's title as the browser's tab and the print table of
// contents show it: "A. Reproducing the records".
func fullTitle(it Item) string {
	if it.Label != "" {
		return it.Label + ". " + it.Title
	}
	return it.Title
}

// chapterPage renders chapter i as the page at page.
func (p *pager) chapterPage(i int, page string) []byte {
	c := p.chapters[i]
	dir := dirOf(page)
	data := pageData{
		BookTitle:    p.title,
		ChapterTitle: fullTitle(c.Item),
		Root:         rootPrefix(page),
		Sidebar:      template.HTML(p.sidebar(c.Item.Path, page)),
		Content:      template.HTML(c.Body),
		Kind:         "chapter",
	}
	for _, h := range c.Headings {
		if (h.Level == 2 || h.Level == 3) && h.ID != "" {
			data.PageTOC = append(data.PageTOC, h)
		}
	}
	if len(data.PageTOC) < 2 {
		data.PageTOC = nil // a list of one heading helps nobody
	}
	if i > 0 {
		prev := p.chapters[i-1]
		data.Prev = &navLink{Href: relPath(dir, prev.Page), Title: fullTitle(prev.Item)}
	}
	if i+1 < len(p.chapters) {
		next := p.chapters[i+1]
		data.Next = &navLink{Href: relPath(dir, next.Page), Title: fullTitle(next.Item)}
	}
	return p.execute(data)
}

// printPages renders every chapter for printing, in order, after a cover
// and a table of contents: print.html, then as many volumes (print-2.html,
// …) as keep each page under printVolumeBudget (weight.go), a chapter never
// cut. Every chapter starts a new sheet, so a chapter prints the same
// sheets alone as in its volume: bookcheck -print-pages counts each one's
// sheets that way and writes the page numbers into the contents' empty
// <span class="toc-page"> (see tools/cmd/bookcheck/print.go). Links between
// chapters in different volumes lead to the other volume's page.
func (p *pager) printPages() map[string][]byte {
	blocks := make([]string, len(p.chapters))
	for i, c := range p.chapters {
		blocks[i] = string(c.PrintBody)
	}
	vols := packParts(blocks, printVolumeBudget)
	volOf := map[string]int{} // print id → volume
	for v, vol := range vols {
		for _, i := range vol {
			volOf[p.chapters[i].PrintID] = v
		}
	}
	pages := make([]string, len(vols))
	for v := range vols {
		pages[v] = partPageName(printPage, v)
	}
	ids := map[string]string{}
	for _, c := range p.chapters {
		ids[c.Item.Path] = c.PrintID
	}

	var toc strings.Builder
	toc.WriteString(`<nav class="print-toc" aria-label="Contents">` + "\n<p class=\"print-toc-title\">Contents</p>\n")
	if len(vols) > 1 {
		fmt.Fprintf(&toc, "<p class=\"print-volumes\">The book prints from %d pages, each under 1 MB so that a phone or a small machine can open it; print each in turn:", len(vols))
		for v, name := range pages {
			fmt.Fprintf(&toc, " <a href=\"%s\">volume %d</a>", name, v+1)
		}
		toc.WriteString(". The page numbers below run through all of them.</p>\n")
	}
	toc.WriteString("<ol>\n")
	for _, it := range p.summary.Items {
		switch {
		case it.Kind == ItemPart:
			toc.WriteString(`<li class="part-title">` + escapeHTML(it.Title) + "</li>\n")
		case it.Kind == ItemChapter && it.Path != "":
			label := ""
			if it.Label != "" {
				label = `<span class="chapter-label">` + escapeHTML(it.Label) + "</span> "
			}
			id := ids[it.Path]
			fmt.Fprintf(&toc, `<li class="toc-level%d"><a href="%s#%s">%s%s</a><span class="toc-page" data-print-id="%s"></span></li>`+"\n",
				it.Level, pages[0], escapeHTML(id), label, escapeHTML(it.Title), escapeHTML(id))
		}
	}
	toc.WriteString("</ol>\n</nav>\n")

	out := map[string][]byte{}
	for v, vol := range vols {
		var body strings.Builder
		if v == 0 {
			body.WriteString(`<section class="print-cover">` + "\n")
			fmt.Fprintf(&body, "<p class=\"cover-title\">%s</p>\n", escapeHTML(p.title))
			fmt.Fprintf(&body, "<p class=\"cover-note\">The whole book for printing: %d chapters. Each stage's diff is summarised by the files it changed; the diffs themselves, and every source file with numbered lines, are on the book's own pages.</p>\n", len(p.chapters))
			body.WriteString("</section>\n")
			body.WriteString(toc.String())
		} else {
			fmt.Fprintf(&body, "<p class=\"print-volume-note\">Volume %d of %d of the book for printing; the cover and the contents are in <a href=\"%s\">volume 1</a>.</p>\n", v+1, len(vols), pages[0])
		}
		for _, i := range vol {
			c := p.chapters[i]
			body.WriteString(`<section class="print-chapter" id="` + escapeHTML(c.PrintID) + `">` + "\n")
			body.Write(c.PrintBody)
			body.WriteString("</section>\n")
		}
		html := body.String()
		// The contents link every chapter on the first page; a link to a
		// chapter printed in another volume leads there.
		html = printLinkRE.ReplaceAllStringFunc(html, func(m string) string {
			frag := printLinkRE.FindStringSubmatch(m)[1]
			chapterID, _, _ := strings.Cut(frag, "--")
			if w, ok := volOf[chapterID]; ok && w != v {
				return `href="` + pages[w] + "#" + frag + `"`
			}
			if strings.HasPrefix(m, `href="`+printPage+"#") {
				return `href="#` + frag + `"`
			}
			return m
		})
		title := "Print"
		if len(vols) > 1 {
			title = fmt.Sprintf("Print, volume %d of %d", v+1, len(vols))
		}
		out[pages[v]] = p.execute(pageData{
			BookTitle:    p.title,
			ChapterTitle: title,
			Root:         "",
			Sidebar:      template.HTML(p.sidebar("", pages[v])),
			Content:      template.HTML(html),
			Print:        true,
			Kind:         "print",
		})
	}
	return out
}

// printLinkRE matches an in-page link of a print page, or one to
// print.html's contents: href="#id" or href="print.html#id".
var printLinkRE = regexp.MustCompile(`href="(?:` + regexp.QuoteMeta(printPage) + `)?#([^"]+)"`)

func dirOf(page string) string {
	if i := strings.LastIndex(page, "/"); i >= 0 {
		return page[:i]
	}
	return "."
}

// sidebar renders the table of contents for the page at page, marking the
// chapter active.
func (p *pager) sidebar(active, page string) string {
	dir := dirOf(page)
	var b strings.Builder
	b.WriteString(`<ol class="toc">` + "\n")
	depth, open := 0, false // open: an <li> is open at depth
	for _, it := range p.summary.Items {
		level := 0
		if it.Kind == ItemChapter {
			level = it.Level
		}
		for depth > level {
			b.WriteString("</li>\n</ol>\n")
			depth--
			open = true
		}
		if level > depth {
			b.WriteString(`<ol class="section">` + "\n")
			depth++
			open = false
		}
		if open {
			b.WriteString("</li>\n")
		}
		switch it.Kind {
		case ItemPart:
			b.WriteString(`<li class="part-title">` + escapeHTML(it.Title))
		case ItemSeparator:
			b.WriteString(`<li class="spacer" aria-hidden="true">`)
		case ItemChapter:
			label := ""
			if it.Label != "" {
				label = `<strong class="chapter-label">` + escapeHTML(it.Label) + `</strong> `
			}
			switch {
			case it.Path == "":
				b.WriteString(`<li class="chapter-item draft"><span title="Not written yet">` + label + escapeHTML(it.Title) + `</span>`)
			case it.Path == active:
				b.WriteString(`<li class="chapter-item"><a class="active" aria-current="page" href="` +
					escapeHTML(relPath(dir, p.pages[it.Path])) + `">` + label + escapeHTML(it.Title) + `</a>`)
			default:
				b.WriteString(`<li class="chapter-item"><a href="` +
					escapeHTML(relPath(dir, p.pages[it.Path])) + `">` + label + escapeHTML(it.Title) + `</a>`)
			}
		}
		open = true
	}
	for depth > 0 {
		b.WriteString("</li>\n</ol>\n")
		depth--
	}
	if open {
		b.WriteString("</li>\n")
	}
	b.WriteString("</ol>")
	return b.String()
}
