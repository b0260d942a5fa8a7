package book

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file renders the stages' source files as pages of the site, so that
// a listing's caption is one click from the whole file:
//
//	src/index.html                         the stages
//	src/STAGE/index.html                   a stage's files
//	src/STAGE/PATH.html                    one file, every line with id L<n>
//
// Every file under a stage directory (a directory of the root named
// stage<N>-..., holding go.mod) gets a page, and so does any other file a
// chapter includes, and each of rootDocs. Hidden files and directories are skipped, symbolic links
// are not followed, and a file that is not UTF-8 text, or is larger than
// maxSourceBytes, is listed but not shown. An {{#include}} caption links to
// src/STAGE/PATH.html#L<first>-L<last>; the script marks that span of lines
// and the link checker accepts such a range when both ends exist.

const (
	srcDir         = "src"
	maxSourceBytes = 512 << 10
)

var stageDirRE = regexp.MustCompile(`^stage[0-9]+-[a-z0-9-]+$`)

// rootDocs are files of the root that get a source page whenever they
// exist, so that chapters can link to them (src/DESIGN.md.html): the
// design the code cites by section.
var rootDocs = []string{"DESIGN.md"}

// sourcePage is the site path of the page showing the file at the slash
// path p (relative to the root).
func sourcePage(p string) string { return srcDir + "/" + p + ".html" }

// lineRange is the fragment naming lines first to last of a source page.
func lineRange(first, last int) string {
	if first == last {
		return "L" + strconv.Itoa(first)
	}
	return "L" + strconv.Itoa(first) + "-L" + strconv.Itoa(last)
}

// sourceStages lists the stage directories of the root, in name order.
func sourceStages(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && stageDirRE.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(root, e.Name(), "go.mod")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return stageLess(out[i], out[j]) })
	return out, nil
}

// stageLess orders stage directories by number: stage2 before stage10.
func stageLess(a, b string) bool {
	na, _ := strconv.Atoi(strings.TrimPrefix(a[:strings.IndexByte(a, '-')], "stage"))
	nb, _ := strconv.Atoi(strings.TrimPrefix(b[:strings.IndexByte(b, '-')], "stage"))
	if na != nb {
		return na < nb
	}
	return a < b
}

// sourceFile is one file with a page.
type sourceFile struct {
	Path  string // slash path relative to the root
	Lines int
	Shown bool // false: binary or too large, listed only
}

// sourceFiles walks one stage directory.
func sourceFiles(root, stage string) ([]sourceFile, error) {
	var out []sourceFile
	err := filepath.WalkDir(filepath.Join(root, stage), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if strings.HasPrefix(name, ".") && name != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(name, ".") || !d.Type().IsRegular() {
			return nil // hidden, or a symbolic link: never followed
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f, err := readSourceFile(root, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		out = append(out, f.sourceFile)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

type loadedSource struct {
	sourceFile
	text string
}

func readSourceFile(root, p string) (loadedSource, error) {
	data, err := readRootFile(root, p)
	if err != nil {
		return loadedSource{}, err
	}
	f := loadedSource{sourceFile: sourceFile{Path: p}}
	if len(data) > maxSourceBytes || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return f, nil
	}
	f.text = strings.ReplaceAll(string(data), "\r\n", "\n")
	f.Lines = strings.Count(strings.TrimSuffix(f.text, "\n"), "\n") + 1
	f.Shown = true
	return f, nil
}

// sourcePages renders the source pages: every stage's files and any other
// file a chapter included.
func (b *builder) sourcePages(pg *pager, files map[string][]byte) error {
	stages, err := sourceStages(b.cfg.Root)
	if err != nil {
		return err
	}
	byStage := map[string][]sourceFile{}
	have := map[string]bool{}
	for _, st := range stages {
		fs, err := sourceFiles(b.cfg.Root, st)
		if err != nil {
			return err
		}
		byStage[st] = fs
		for _, f := range fs {
			have[f.Path] = true
		}
	}
	var others []sourceFile
	extra := map[string]bool{}
	for p := range b.included {
		extra[p] = true
	}
	for _, p := range rootDocs {
		if fi, err := os.Stat(filepath.Join(b.cfg.Root, p)); err == nil && fi.Mode().IsRegular() {
			extra[p] = true
		}
	}
	for _, p := range sortedKeys(extra) {
		if !have[p] {
			f, err := readSourceFile(b.cfg.Root, p)
			if err != nil {
				return err
			}
			others = append(others, f.sourceFile)
		}
	}

	// The index of stages, then each stage's index and files.
	var idx strings.Builder
	idx.WriteString("<h1>Source code</h1>\n<p>Every file of every stage, with numbered lines: the captions of the book's listings link here.</p>\n<ul class=\"source-index\">\n")
	for _, st := range stages {
		fmt.Fprintf(&idx, `<li><a href="%s/index.html"><code>%s</code></a> — %d files</li>`+"\n", escapeHTML(st), escapeHTML(st), len(byStage[st]))
	}
	for _, f := range others {
		fmt.Fprintf(&idx, `<li><a href="%s"><code>%s</code></a></li>`+"\n", escapeHTML(f.Path+".html"), escapeHTML(f.Path))
	}
	idx.WriteString("</ul>\n")
	files[srcDir+"/index.html"] = pg.plainPage(srcDir+"/index.html", "Source code", idx.String())

	for _, st := range stages {
		page := srcDir + "/" + st + "/index.html"
		var s strings.Builder
		fmt.Fprintf(&s, "<nav class=\"breadcrumbs\" aria-label=\"Breadcrumbs\"><a href=\"../index.html\">Source</a> / %s</nav>\n<h1><code>%s</code></h1>\n", escapeHTML(st), escapeHTML(st))
		s.WriteString(scrollRegion("table-wrap", "Files of "+st) + `<table class="source-files">` + "\n<thead><tr><th>file</th><th class=\"num\">lines</th></tr></thead>\n<tbody>\n")
		for _, f := range byStage[st] {
			rel := strings.TrimPrefix(f.Path, st+"/")
			lines := "—"
			if f.Shown {
				lines = strconv.Itoa(f.Lines)
			}
			fmt.Fprintf(&s, `<tr><td><a href="%s"><code>%s</code></a></td><td class="num">%s</td></tr>`+"\n", escapeHTML(rel+".html"), escapeHTML(rel), lines)
		}
		s.WriteString("</tbody>\n</table></div>\n")
		files[page] = pg.plainPage(page, st, s.String())
	}
	var paths []string
	for _, st := range stages {
		for _, f := range byStage[st] {
			paths = append(paths, f.Path)
		}
	}
	for _, f := range others {
		paths = append(paths, f.Path)
	}
	return b.sourceFilePages(pg, files, paths)
}

// sourceFilePages renders the source pages of paths on every core: the
// highlighting of ~1,000 files is most of the book's build time. Each
// worker renders a page on its own (the highlighter, the lexers and the
// pager are only read, and chroma's lexers compile under their own lock);
// only the writes to files take mu. The first error wins.
func (b *builder) sourceFilePages(pg *pager, files map[string][]byte, paths []string) error {
	var (
		mu       sync.Mutex // guards files and firstErr
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan string)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				page, data, err := b.sourceFilePage(pg, p)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				} else if err == nil {
					files[page] = data
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
	return firstErr
}

func (b *builder) sourceFilePage(pg *pager, p string) (string, []byte, error) {
	f, err := readSourceFile(b.cfg.Root, p)
	if err != nil {
		return "", nil, err
	}
	page := sourcePage(p)
	dir := dirOf(page)
	var s strings.Builder
	s.WriteString(`<nav class="breadcrumbs" aria-label="Breadcrumbs"><a href="` + escapeHTML(relPath(dir, srcDir+"/index.html")) + `">Source</a>`)
	parts := strings.Split(p, "/")
	if stageDirRE.MatchString(parts[0]) && len(parts) > 1 {
		s.WriteString(` / <a href="` + escapeHTML(relPath(dir, srcDir+"/"+parts[0]+"/index.html")) + `">` + escapeHTML(parts[0]) + "</a>")
		parts = parts[1:]
	}
	s.WriteString(" / " + escapeHTML(strings.Join(parts, " / ")) + "</nav>\n")
	s.WriteString(`<h1 class="source-title"><code>` + escapeHTML(p) + "</code></h1>\n")
	if !f.Shown {
		s.WriteString("<p>Not shown: binary, or larger than " + strconv.Itoa(maxSourceBytes>>10) + " KiB.</p>\n")
	} else {
		fmt.Fprintf(&s, `<p class="source-facts">%d lines; a line's number links to it, and #L12-L20 marks a span</p>`+"\n", f.Lines)
		nums := make([]int, f.Lines)
		for i := range nums {
			nums[i] = i + 1
		}
		s.WriteString(`<div class="source-listing">` + b.hl.listing(f.text, languageOf(p), listingOptions{
			Numbers: nums,
			Href:    func(n int) string { return "#L" + strconv.Itoa(n) },
			IDs:     true,
		}) + "</div>\n")
	}
	return page, pg.plainPage(page, path.Base(p), s.String()), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// plainPage renders a page that is not a chapter (the source pages) in the
// book's frame, with no chapter marked in the sidebar.
func (p *pager) plainPage(page, title, content string) []byte {
	return p.execute(pageData{
		BookTitle:    p.title,
		ChapterTitle: title,
		Root:         rootPrefix(page),
		Sidebar:      template.HTML(p.sidebar("", page)),
		Content:      template.HTML(content),
		Kind:         "source",
	})
}
