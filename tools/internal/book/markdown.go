package book

import (
	"bytes"
	stdhtml "html"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// This file turns a chapter's expanded Markdown into HTML with goldmark (GFM,
// footnotes, typographer), and does the three things mdBook does to each
// page: heading ids with a visible anchor link, links to other chapters'
// .md files rewritten to their .html pages, and code fences highlighted.
// For print.html the same chapter is rendered again with every id prefixed
// by the chapter's id and every link turned into an in-page fragment.

// heading is an entry of a page's "On this page" list.
type heading struct {
	Level int
	ID    string
	Text  string
}

// linkMode says how a chapter's links and ids are written.
type linkMode struct {
	chapterPath string            // the chapter's .md path, relative to the book directory
	pagePath    string            // the page being written, relative to the site root
	chapters    map[string]string // chapter .md path → its page path
	print       bool              // rendering into print.html
	printIDs    map[string]string // chapter .md path → its section id in print.html
	label       string            // the chapter's letter ("A"), shown before its # heading
}

// idPrefix is what print.html puts before this chapter's ids.
func (m linkMode) idPrefix() string {
	if !m.print {
		return ""
	}
	return m.printIDs[m.chapterPath] + "--"
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// isExternal reports whether href leaves the site (http:, mailto:, //host).
func isExternal(href string) bool {
	return schemeRE.MatchString(href) || strings.HasPrefix(href, "//")
}

// rewrite maps a link destination as written in the chapter to the page.
func (m linkMode) rewrite(dest string) string {
	if dest == "" || isExternal(dest) || strings.HasPrefix(dest, "/") {
		return dest // absolute paths are left for the link checker to report
	}
	p, frag, hasFrag := strings.Cut(dest, "#")
	if p == "" { // "#frag": this page
		if m.print {
			return "#" + m.idPrefix() + frag
		}
		return dest
	}
	target := path.Join(path.Dir(m.chapterPath), p)
	if strings.HasSuffix(p, ".md") {
		if m.print {
			if id, ok := m.printIDs[target]; ok {
				if hasFrag && frag != "" {
					return "#" + id + "--" + frag
				}
				return "#" + id
			}
		}
		out, ok := m.chapters[target]
		if !ok {
			return dest // not a chapter: left as .md for the link checker to report
		}
		if m.print {
			return withFrag(out, frag, hasFrag)
		}
		return withFrag(relPath(path.Dir(m.pagePath), out), frag, hasFrag)
	}
	if m.print {
		// print.html sits at the site root; the chapter may not.
		return withFrag(target, frag, hasFrag)
	}
	return dest
}

func withFrag(p, frag string, hasFrag bool) string {
	if hasFrag {
		return p + "#" + frag
	}
	return p
}

// relPath returns the relative URL path from directory fromDir to target,
// both relative to the site root.
func relPath(fromDir, target string) string {
	if fromDir == "." || fromDir == "" {
		return target
	}
	from := strings.Split(fromDir, "/")
	to := strings.Split(target, "/")
	i := 0
	for i < len(from) && i < len(to)-1 && from[i] == to[i] {
		i++
	}
	return strings.Repeat("../", len(from)-i) + strings.Join(to[i:], "/")
}

// rootPrefix is the relative path from a page to the site root: "" or "../".
func rootPrefix(pagePath string) string {
	return strings.Repeat("../", strings.Count(pagePath, "/"))
}

// markdown renders chapters.
type markdown struct {
	hl *highlighter
}

func (md *markdown) goldmark(mode linkMode) goldmark.Markdown {
	return goldmark.New(
		goldmark.WithExtensions(
			extension.GFM,
			extension.Typographer,
			extension.NewFootnote(extension.WithFootnoteIDPrefix(mode.idPrefix())),
		),
		goldmark.WithParserOptions(parser.WithAttribute()), // ## Title {#id} sets an id
		goldmark.WithRendererOptions(
			html.WithUnsafe(), // chapters may hold raw HTML; the directives' output relies on it
			renderer.WithNodeRenderers(util.Prioritized(newNodeRenderer(md.hl, mode.label), 100)),
		),
	)
}

// render parses and renders src (a chapter after directive expansion),
// returning the HTML and its headings.
func (md *markdown) render(src []byte, mode linkMode) ([]byte, []heading, error) {
	gm := md.goldmark(mode)
	doc := gm.Parser().Parse(text.NewReader(src))

	// Heading ids come from the heading's text as a reader sees it, not
	// its Markdown (goldmark's own ids would slug an inline directive's
	// <span>). Ids set with {#id} are taken first, so a generated one
	// never collides with them.
	ids := newSlugs()
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			if id := headingID(h); id != "" {
				ids.Put([]byte(id))
			}
		}
		return ast.WalkContinue, nil
	})

	var headings []heading
	prefix := mode.idPrefix()
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			id := headingID(n)
			if id == "" {
				id = string(ids.Generate([]byte(plainText(n, src)), ast.KindHeading))
				n.SetAttributeString("id", []byte(id))
			}
			if prefix != "" {
				id = prefix + id
				n.SetAttributeString("id", []byte(id))
			}
			headings = append(headings, heading{Level: n.Level, ID: id, Text: plainText(n, src)})
		case *ast.Paragraph:
			if mode.glossary() {
				if term := definedTerm(n, src); term != "" {
					n.SetAttributeString("id", []byte(prefix+string(ids.Generate([]byte("term "+term), ast.KindParagraph))))
				}
			}
		case *ast.Link:
			n.Destination = []byte(mode.rewrite(string(n.Destination)))
		case *ast.Image:
			n.Destination = []byte(mode.rewrite(string(n.Destination)))
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if err := gm.Renderer().Render(&out, src, doc); err != nil {
		return nil, nil, err
	}
	return out.Bytes(), headings, nil
}

// glossaryChapter is the chapter whose definitions get anchors of their own.
const glossaryChapter = "glossary.md"

// glossary reports whether the chapter is the glossary.
func (m linkMode) glossary() bool { return path.Base(m.chapterPath) == glossaryChapter }

// definedTerm returns the term a glossary paragraph defines: the text of
// the bold phrase it opens with ("**Bus address.** How a command…"),
// without its full stop; "" when the paragraph does not open that way.
// Its id is "term-" and the term slugged: #term-bus-address.
func definedTerm(p *ast.Paragraph, src []byte) string {
	e, ok := p.FirstChild().(*ast.Emphasis)
	if !ok || e.Level != 2 {
		return ""
	}
	t := plainText(e, src)
	if !strings.HasSuffix(t, ".") {
		return ""
	}
	return strings.TrimSpace(strings.TrimSuffix(t, "."))
}

// headingID returns the id a heading was given with {#id}, or "".
func headingID(h *ast.Heading) string {
	if v, ok := h.AttributeString("id"); ok {
		if b, ok := v.([]byte); ok {
			return string(b)
		}
	}
	return ""
}

// plainText is the text of an inline tree, without markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			// As the HTML writer does: drop backslash escapes, decode
			// character references.
			b.WriteString(stdhtml.UnescapeString(string(util.UnescapePunctuations(c.Segment.Value(src)))))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			// The typographer's strings are HTML entities ("&rsquo;");
			// the text is escaped again where it is written.
			b.WriteString(stdhtml.UnescapeString(string(c.Value)))
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.TrimSpace(b.String())
}

// slugs generates heading ids the way mdBook and GitHub do: lower case,
// letters, digits, '-' and '_' kept, spaces turned into '-', the rest
// dropped; a repeated id gets "-1", "-2", ....
type slugs struct {
	used map[string]bool
}

func newSlugs() *slugs { return &slugs{used: map[string]bool{}} }

func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			b.WriteRune(r)
			dash = false
		case r == ' ' || r == '-' || r == '\t':
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		return "section"
	}
	return out
}

func (s *slugs) Generate(value []byte, kind ast.NodeKind) []byte {
	base := slugify(string(value))
	id := base
	for n := 1; s.used[id]; n++ {
		id = base + "-" + strconv.Itoa(n)
	}
	s.used[id] = true
	return []byte(id)
}

func (s *slugs) Put(value []byte) { s.used[string(value)] = true }

// nodeRenderer overrides goldmark's headings, code blocks and tables.
type nodeRenderer struct {
	hl    *highlighter
	label string // the chapter's letter, written before the first # heading
	table renderer.NodeRendererFunc
}

func newNodeRenderer(hl *highlighter, label string) *nodeRenderer {
	r := &nodeRenderer{hl: hl, label: label}
	// GFM's own table renderer draws the table; renderTable wraps it.
	extension.NewTableHTMLRenderer().RegisterFuncs(registerFunc(func(k ast.NodeKind, f renderer.NodeRendererFunc) {
		if k == east.KindTable {
			r.table = f
		}
	}))
	return r
}

// registerFunc adapts a function to goldmark's registerer.
type registerFunc func(ast.NodeKind, renderer.NodeRendererFunc)

func (f registerFunc) Register(k ast.NodeKind, fn renderer.NodeRendererFunc) { f(k, fn) }

func (r *nodeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindHeading, r.renderHeading)
	reg.Register(ast.KindFencedCodeBlock, r.renderFencedCode)
	reg.Register(ast.KindCodeBlock, r.renderIndentedCode)
	reg.Register(east.KindTable, r.renderTable)
}

// renderTable puts a Markdown table in the same scrolling frame as the
// generated ones, so that a wide table scrolls inside the column, with a
// shadow at the clipped edge, instead of making the page pan sideways.
func (r *nodeRenderer) renderTable(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		_, _ = w.WriteString(scrollRegion("table-wrap", "Table") + "\n")
	}
	s, err := r.table(w, src, node, entering)
	if !entering {
		_, _ = w.WriteString("</div>\n")
	}
	return s, err
}

// renderHeading writes <hN id="x"><a class="anchor" href="#x">#</a>Text</hN>;
// the anchor shows on hover, as in mdBook and GitHub. A lettered chapter's
// # heading starts with its letter, as its sidebar entry does.
func (r *nodeRenderer) renderHeading(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Heading)
	level := strconv.Itoa(n.Level)
	if !entering {
		_, _ = w.WriteString("</h" + level + ">\n")
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString("<h" + level)
	if n.Attributes() != nil {
		html.RenderAttributes(w, n, html.HeadingAttributeFilter)
	}
	_ = w.WriteByte('>')
	if v, ok := n.AttributeString("id"); ok {
		if id, ok := v.([]byte); ok && len(id) > 0 {
			_, _ = w.WriteString(`<a class="anchor" href="#` + escapeHTML(string(id)) + `" aria-label="Link to this section">#</a>`)
		}
	}
	if n.Level == 1 && r.label != "" {
		_, _ = w.WriteString(`<span class="chapter-label">` + escapeHTML(r.label) + `</span> `)
		r.label = ""
	}
	return ast.WalkContinue, nil
}

func (r *nodeRenderer) renderFencedCode(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.FencedCodeBlock)
	lang := ""
	if n.Info != nil {
		info := string(n.Info.Segment.Value(src))
		lang, _, _ = strings.Cut(strings.TrimSpace(info), " ")
		lang = strings.Trim(lang, "{}.") // ```{.go} and ```go both mean go
	}
	_, _ = w.WriteString(r.hl.highlight(codeLines(n, src), lang))
	return ast.WalkSkipChildren, nil
}

func (r *nodeRenderer) renderIndentedCode(w util.BufWriter, src []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString(r.hl.highlight(codeLines(node, src), "text"))
	return ast.WalkSkipChildren, nil
}

func codeLines(n ast.Node, src []byte) string {
	var b strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}
