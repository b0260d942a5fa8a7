package book

import (
	"bytes"
	_ "embed"
	"html/template"
	"strings"
)

// This file wraps rendered chapters in the page every chapter shares: the
// sidebar table of contents with the current chapter marked, the "On this
// page" list of the chapter's headings, previous/next links (the script
// binds them to ← and →), and print.html with every chapter in order.

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

// chapterPage renders chapter i as the page at page.
func (p *pager) chapterPage(i int, page string) []byte {
	c := p.chapters[i]
	dir := dirOf(page)
	data := pageData{
		BookTitle:    p.title,
		ChapterTitle: c.Item.Title,
		Root:         rootPrefix(page),
		Sidebar:      template.HTML(p.sidebar(c.Item.Path, page)),
		Content:      template.HTML(c.Body),
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
		data.Prev = &navLink{Href: relPath(dir, prev.Page), Title: prev.Item.Title}
	}
	if i+1 < len(p.chapters) {
		next := p.chapters[i+1]
		data.Next = &navLink{Href: relPath(dir, next.Page), Title: next.Item.Title}
	}
	return p.execute(data)
}

// printPage renders every chapter on one page.
func (p *pager) printPage() []byte {
	var body strings.Builder
	for _, c := range p.chapters {
		body.WriteString(`<section class="print-chapter" id="` + escapeHTML(c.PrintID) + `">` + "\n")
		body.Write(c.PrintBody)
		body.WriteString("</section>\n")
	}
	return p.execute(pageData{
		BookTitle:    p.title,
		ChapterTitle: "Print",
		Root:         "",
		Sidebar:      template.HTML(p.sidebar("", printPage)),
		Content:      template.HTML(body.String()),
		Print:        true,
	})
}

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
			num := ""
			if n := it.NumberString(); n != "" {
				num = `<strong aria-hidden="true">` + n + `</strong> `
			}
			switch {
			case it.Path == "":
				b.WriteString(`<li class="chapter-item draft"><span title="Not written yet">` + num + escapeHTML(it.Title) + `</span>`)
			case it.Path == active:
				b.WriteString(`<li class="chapter-item"><a class="active" aria-current="page" href="` +
					escapeHTML(relPath(dir, p.pages[it.Path])) + `">` + num + escapeHTML(it.Title) + `</a>`)
			default:
				b.WriteString(`<li class="chapter-item"><a href="` +
					escapeHTML(relPath(dir, p.pages[it.Path])) + `">` + num + escapeHTML(it.Title) + `</a>`)
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
