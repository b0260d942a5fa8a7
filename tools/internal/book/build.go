package book

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/records"
)

// Config says where a book is and where it goes.
type Config struct {
	Root    string // repository root: {{#include}} paths are relative to it
	BookDir string // SUMMARY.md, the chapters, records/ and any other files to copy
	OutDir  string // the site; replaced on every build
	Title   string // book title, used when SUMMARY.md's heading is just "Summary"
	Differ  Differ // stage diffs for {{#diff}}; nil makes {{#diff}} an error
	// Edition refuses any stale record (stale.go): the build of an edition
	// whose records were all re-taken at one commit.
	Edition bool
	// Context, when it ends (a signal), stops the build between chapters
	// and before the site is written; nil never stops it.
	Context context.Context
}

// stopped returns the error of cfg.Context once it has ended, nil before.
func (cfg Config) stopped() error {
	if cfg.Context == nil {
		return nil
	}
	return cfg.Context.Err()
}

// Site is a rendered book, in memory.
type Site struct {
	Files  map[string][]byte // slash path relative to the site root → contents
	Index  string            // "index.html"
	Broken []BrokenLink      // internal links that do not resolve
	Heavy  []error           // pages over maxPageBytes (weight.go), each wrapping ErrPageTooHeavy
}

// BuildError is every error a build found, one per line.
type BuildError struct {
	Errs []error
}

func (e *BuildError) Error() string {
	var b strings.Builder
	for i, err := range e.Errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *BuildError) Unwrap() []error { return e.Errs }

//go:embed assets
var assets embed.FS

// The generated files a book cannot also contain.
const (
	staticDir  = "static"
	printPage  = "print.html"
	indexPage  = "index.html"
	siteMarker = ".softgpu-book" // marks an output directory this tool may clear
)

type builder struct {
	cfg      Config
	hl       *highlighter
	md       *markdown
	records  *recordSet
	diagrams int                 // diagrams inlined so far: each use's ids get their own prefix
	diffs    map[string]diffPage // site path → a stage diff's own page (or part of one), written by diffPages
	// diffParts maps a diff's first page to which of its pages holds each
	// file's hunks (file path → site path); written by diffPages.
	diffParts map[string]map[string]string
	included  map[string]bool // files {{#include}} showed, each of which gets a source page
	stale     *staleChecker   // which records predate changes to the code they measured
	// printedStale names the stale records whose commit list the page being
	// rendered has printed so far (stale.go).
	printedStale  map[string]bool
	ledger        map[string]shownFigure // the page's figures, one per quantity (ledger.go)
	unpairedShown int                    // comparisons of wake-state rows the page marked (wake.go)
	printing      bool                   // rendering for print.html: lists of later commits print open
}

// chapter is one chapter being built.
type chapter struct {
	Item      Item
	Source    string // display path for messages, e.g. "book/stage0.md"
	Page      string // output page, relative to the site root
	PrintID   string // its section id in print.html
	Body      []byte // rendered HTML for its own page
	PrintBody []byte // rendered HTML for print.html
	Headings  []heading
}

// Render builds the site in memory. A chapter or SUMMARY.md error returns a
// *BuildError and no site; broken links are reported in Site.Broken.
func Render(cfg Config) (*Site, error) {
	hl := newHighlighter()
	b := &builder{cfg: cfg, hl: hl, md: &markdown{hl: hl}, included: map[string]bool{}}
	b.records = &recordSet{dir: filepath.Join(cfg.BookDir, "records"), cache: map[string]*records.Record{}, display: b.display}
	b.stale = &staleChecker{root: cfg.Root, cache: map[string]staleness{}}
	return b.render()
}

func (b *builder) display(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(p)
}

func (b *builder) render() (*Site, error) {
	summaryPath := filepath.Join(b.cfg.BookDir, "SUMMARY.md")
	text, err := os.ReadFile(summaryPath)
	if err != nil {
		return nil, fmt.Errorf("book: %w (is -book the book directory?)", err)
	}
	sum, err := ParseSummary(b.display(summaryPath), text)
	if err != nil {
		return nil, &BuildError{Errs: []error{err}}
	}
	title := sum.Title
	if title == "" || strings.EqualFold(title, "summary") || strings.EqualFold(title, "table of contents") {
		title = b.cfg.Title
	}
	if title == "" {
		title = "Book"
	}

	// Pages and print ids for every chapter, before any is rendered, since
	// a chapter may link to any other.
	var chapters []*chapter
	pages := map[string]string{}
	printIDs := map[string]string{}
	usedPages := map[string]string{printPage: "print.html"}
	var errs []error
	for _, it := range sum.Chapters() {
		page := strings.TrimSuffix(it.Path, ".md") + ".html"
		if other, dup := usedPages[page]; dup {
			errs = append(errs, fmt.Errorf("%s:%d: %s would be written to %s, as %s is", b.display(summaryPath), it.Line, it.Path, page, other))
			continue
		}
		usedPages[page] = it.Path
		c := &chapter{
			Item:    it,
			Source:  b.display(filepath.Join(b.cfg.BookDir, filepath.FromSlash(it.Path))),
			Page:    page,
			PrintID: strings.ReplaceAll(strings.TrimSuffix(it.Path, ".md"), "/", "-"),
		}
		chapters = append(chapters, c)
		pages[it.Path] = page
		printIDs[it.Path] = c.PrintID
	}

	for _, c := range chapters {
		src, err := os.ReadFile(filepath.Join(b.cfg.BookDir, filepath.FromSlash(c.Item.Path)))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: chapter %s: %w", b.display(summaryPath), c.Item.Line, c.Item.Path, err))
			continue
		}
		errs = append(errs, b.renderChapter(c, src, pages, printIDs)...)
		if err := b.cfg.stopped(); err != nil {
			return nil, err
		}
	}
	if len(errs) > 0 {
		return nil, &BuildError{Errs: errs}
	}

	site := &Site{Files: map[string][]byte{}, Index: indexPage}
	pg := &pager{summary: sum, title: title, chapters: chapters, pages: pages}
	for i, c := range chapters {
		site.Files[c.Page] = pg.chapterPage(i, c.Page)
	}
	first := chapters[0]
	if _, taken := site.Files[indexPage]; !taken {
		if !strings.Contains(first.Page, "/") {
			site.Files[indexPage] = site.Files[first.Page]
		} else {
			site.Files[indexPage] = redirectPage(first.Page)
		}
	}
	for page, data := range pg.printPages() {
		site.Files[page] = data
	}
	if err := b.sourcePages(pg, site.Files); err != nil {
		return nil, fmt.Errorf("book: source pages: %w", err)
	}
	for page, dp := range b.diffs {
		site.Files[page] = pg.plainPage(page, dp.title, dp.content)
	}
	site.Files[searchIndexFile] = searchIndex(chapters)

	if err := b.addStatic(site.Files); err != nil {
		return nil, err
	}
	if err := b.copyBookFiles(site.Files); err != nil {
		return nil, err
	}
	broken := append(CheckLinks(site.Files), checkPrintIDs(chapters, site.Files)...)
	sort.SliceStable(broken, func(i, j int) bool { return broken[i].Page < broken[j].Page })
	site.Broken = reportedLinks(broken, site.Files, first.Page)
	site.Heavy = checkWeight(site.Files)
	return site, nil
}

// reportedLinks drops the echoes of a broken link: index.html when it is a
// copy of the first chapter, and the print pages (print.html and its
// volumes), which repeat every chapter's links, until the chapters' own
// pages are clean.
func reportedLinks(broken []BrokenLink, files map[string][]byte, firstPage string) []BrokenLink {
	indexIsCopy := bytes.Equal(files[indexPage], files[firstPage])
	chapterErrors := false
	for _, l := range broken {
		if !isPrintPage(l.Page) && !(l.Page == indexPage && indexIsCopy) {
			chapterErrors = true
		}
	}
	var out []BrokenLink
	for _, l := range broken {
		if l.Page == indexPage && indexIsCopy || isPrintPage(l.Page) && chapterErrors {
			continue
		}
		out = append(out, l)
	}
	return out
}

// printPageRE matches print.html and its volumes, print-2.html, …
// (partPageName).
var printPageRE = regexp.MustCompile(`^` + regexp.QuoteMeta(strings.TrimSuffix(printPage, ".html")) + `(-[0-9]+)?\.html$`)

func isPrintPage(page string) bool { return printPageRE.MatchString(page) }

// renderChapter expands and renders one chapter for its page and for
// print.html, returning every error it found.
func (b *builder) renderChapter(c *chapter, src []byte, pages, printIDs map[string]string) []error {
	pageMode := linkMode{chapterPath: c.Item.Path, pagePath: c.Page, chapters: pages, printIDs: printIDs, label: c.Item.Label}
	printMode := pageMode
	printMode.print, printMode.pagePath = true, printPage

	pagePrefix := rootPrefix(c.Page)
	b.records.used, b.printedStale, b.ledger, b.unpairedShown = map[string]bool{}, map[string]bool{}, map[string]shownFigure{}, 0
	x := expandDirectives(c.Source, src, b.handlers(pagePrefix, "", false))
	if len(x.Errs) > 0 {
		return x.Errs
	}
	body, headings, err := b.md.render(x.Markdown, pageMode)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", c.Source, err)}
	}
	c.Body, c.Headings = fillPlaceholders(body, x.Blocks), headings
	if err := checkTitle(c, src, headings); err != nil {
		return []error{err}
	}
	c.Body = append(append(c.Body, b.pageUnpairedNote()...), b.pageStaleNotes()...)
	if errs := b.checkStale(c.Source, c.Body); len(errs) > 0 {
		return errs
	}

	// print.html is at the root, so links from directives need the root's
	// prefix; the ids a directive makes take the chapter's prefix, as its
	// headings' do; and some directives print differently (a diff as its
	// table).
	b.records.used, b.printedStale, b.ledger, b.unpairedShown = map[string]bool{}, map[string]bool{}, map[string]shownFigure{}, 0
	b.printing = true
	defer func() { b.printing = false }()
	px := expandDirectives(c.Source, src, b.handlers("", printMode.idPrefix(), true))
	printBody, _, err := b.md.render(px.Markdown, printMode)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", c.Source, err)}
	}
	c.PrintBody = append(append(fillPlaceholders(printBody, px.Blocks), b.pageUnpairedNote()...), b.pageStaleNotes()...)
	return nil
}

// handlers dispatches directives; prefix leads from the page to the site
// root; idPrefix goes before every id a directive makes (linkMode.idPrefix);
// print says the HTML is for print.html.
func (b *builder) handlers(prefix, idPrefix string, print bool) handlers {
	return handlers{
		block: func(d directive) (string, error) {
			switch d.Name {
			case "include":
				return b.includeHTML(d, prefix, print)
			case "diff":
				return b.diffHTML(d, prefix, print)
			case "table":
				return b.tableHTML(d, prefix)
			case "chart":
				return b.chartHTML(d, prefix)
			case "records-appendix":
				return b.recordsAppendix(d, prefix, idPrefix)
			case "diagram":
				return b.diagramHTML(d)
			case "timeline":
				return b.timelineHTML(d, prefix)
			}
			return "", d.errorf("unknown directive %q", d.Name)
		},
		inline: func(d directive) (inlineValue, error) {
			switch d.Name {
			case "value":
				return b.value(d)
			case "ratio":
				return b.ratio(d)
			case "meta":
				return b.meta(d)
			case "claim":
				return b.claim(d)
			}
			return inlineValue{}, d.errorf("unknown directive %q", d.Name)
		},
		raw: b.includeRaw,
	}
}

// checkTitle makes sure a chapter has one title: its # heading says what
// SUMMARY.md's link says, so the sidebar, the tab and the page agree.
func checkTitle(c *chapter, src []byte, headings []heading) error {
	line := 0
	fence := false
	for i, l := range strings.Split(string(src), "\n") {
		if fenceOpen.MatchString(l) {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "# ") {
			line = i + 1
			break
		}
	}
	for _, h := range headings {
		if h.Level != 1 {
			continue
		}
		if normalTitle(h.Text) != normalTitle(c.Item.Title) {
			return fmt.Errorf("%s:%d: the chapter's heading %q differs from its title in SUMMARY.md (line %d) %q: a chapter has one title, so make them the same", c.Source, line, h.Text, c.Item.Line, c.Item.Title)
		}
		return nil
	}
	return fmt.Errorf("%s:1: the chapter has no # heading: start it with \"# %s\", its title in SUMMARY.md", c.Source, c.Item.Title)
}

// normalTitle is a title without the marks Markdown and the typographer
// add or take away: code and emphasis markers, curly quotes, dashes.
func normalTitle(s string) string {
	s = strings.NewReplacer("`", "", "*", "", "_", "", "’", "'", "‘", "'", "“", `"`, "”", `"`, "–", "--", "—", "---", "…", "...").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

// addStatic adds the stylesheet, the script and chroma's stylesheet.
func (b *builder) addStatic(files map[string][]byte) error {
	entries, err := fs.ReadDir(assets, "assets")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			return err
		}
		files[staticDir+"/"+e.Name()] = data
	}
	files[staticDir+"/chroma.css"] = b.hl.css()
	return nil
}

// copyBookFiles copies every file of the book directory that is not a
// chapter source (records, their benchstat text, images) into the site at
// the same path, skipping hidden files, directories starting with '_'
// (the default output, book/_site) and the output directory itself.
func (b *builder) copyBookFiles(files map[string][]byte) error {
	outAbs, _ := filepath.Abs(b.cfg.OutDir)
	return filepath.WalkDir(b.cfg.BookDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(b.cfg.BookDir, p)
		if err != nil || rel == "." {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			abs, _ := filepath.Abs(p)
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || abs == outAbs {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".md") || !d.Type().IsRegular() {
			return nil
		}
		key := filepath.ToSlash(rel)
		if _, clash := files[key]; clash || key == staticDir || strings.HasPrefix(key, staticDir+"/") {
			return fmt.Errorf("book: %s clashes with a generated file of the site", b.display(p))
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[key] = data
		return nil
	})
}

// Build renders the site and writes it to cfg.OutDir, returning the path of
// its index.html. Broken links and pages over 1 MB fail the build after the
// site is written, so they can be looked at.
func Build(cfg Config) (string, error) {
	site, err := Render(cfg)
	if err != nil {
		return "", err
	}
	if err := cfg.stopped(); err != nil {
		return "", err
	}
	if err := WriteSite(cfg.OutDir, site.Files); err != nil {
		return "", err
	}
	index := filepath.Join(cfg.OutDir, site.Index)
	errs := site.Heavy
	if len(site.Broken) > 0 {
		for _, l := range site.Broken {
			errs = append(errs, errors.New(l.String()))
		}
		errs = append(errs, fmt.Errorf("book: %d broken internal links (site written to %s)", len(site.Broken), cfg.OutDir))
	}
	if len(errs) > 0 {
		return index, &BuildError{Errs: errs}
	}
	return index, nil
}

// WriteSite replaces the contents of dir with files. It refuses to clear a
// directory that has files but was not written by this tool, so a mistyped
// -o cannot delete someone's work.
func WriteSite(dir string, files map[string][]byte) error {
	switch cleared, err := cli.ClearDir(dir, siteMarker); {
	case err != nil:
		return err
	case !cleared:
		return fmt.Errorf("book: %w", notOurs(dir))
	}
	// The marker first, so that a write stopped part-way leaves a site the
	// next build may replace.
	if err := os.WriteFile(filepath.Join(dir, siteMarker), []byte("written by go run ./tools/cmd/book; cleared on every build\n"), 0o644); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ProbeOutDir checks, before the build, that WriteSite could replace dir:
// a directory that accepts files, or can be made, and is empty or was
// written by this tool.
func ProbeOutDir(dir string) error { return cli.ProbeOut(dir, siteMarker, "the book tool") }

func notOurs(dir string) error { return cli.NotOurs(dir, siteMarker, "the book tool") }

// redirectPage sends index.html to the first chapter when that chapter lives
// in a subdirectory (its relative links would break if copied to the root).
func redirectPage(target string) []byte {
	var b bytes.Buffer
	t := escapeHTML(target)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0; url=%s\">\n<title>Redirecting</title>\n</head>\n<body><p><a href=\"%s\">%s</a></p></body>\n</html>\n", t, t, t)
	return b.Bytes()
}
