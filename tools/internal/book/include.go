package book

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// This file implements {{#include STAGE/PATH:ANCHOR}}: the lines between
//
//	// ANCHOR: NAME
//	// ANCHOR_END: NAME
//
// in the real file <root>/STAGE/PATH, shown as a highlighted code block whose
// caption says where the code lives. The markers may sit in any comment
// syntax (mdBook matches them anywhere on a line). Other anchors' marker
// lines inside the region are dropped, as is the common indentation. A name
// used by several regions of one file includes them all, in file order. With
// no :ANCHOR the whole file is included, its marker lines dropped.

var (
	anchorStartRE = regexp.MustCompile(`\bANCHOR:\s*([\w-]+)`)
	anchorEndRE   = regexp.MustCompile(`\bANCHOR_END:\s*([\w-]+)`)
)

// snippet is the part of a file an include shows.
type snippet struct {
	Path      string // relative to the root, slash-separated
	Code      string // dedented lines, ending in a newline
	FirstLine int    // first and last included line numbers in the file
	LastLine  int
	Lines     []int // file line number of each line of Code
}

// splitIncludeArg splits "stage0-mailbox/device/engine.go:poll" into path and
// anchor.
func splitIncludeArg(arg string) (file, anchor string) {
	file, anchor, _ = strings.Cut(arg, ":")
	return file, anchor
}

// cleanRootPath checks that p names a file inside the root.
func cleanRootPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("no file named")
	}
	if path.IsAbs(p) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("%q: want a path relative to the repository root, like stage0-mailbox/device/engine.go", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q leaves the repository", p)
	}
	return clean, nil
}

// insideRoot resolves every symbolic link in p and returns the real path,
// failing unless it lies inside root (itself resolved): a link in the
// repository that points at /etc must not publish a host file in the site.
// A missing file's error wraps os.ErrNotExist.
func insideRoot(root, p string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(realRoot, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s leads outside the repository, to %s: symbolic links out of the repository are not followed", filepath.Base(p), real)
	}
	return real, nil
}

// readRootFile reads the file at the slash path clean under root, refusing
// one whose real path is outside root.
func readRootFile(root, clean string) ([]byte, error) {
	real, err := insideRoot(root, filepath.Join(root, filepath.FromSlash(clean)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("file %s does not exist", clean)
		}
		return nil, fmt.Errorf("%s: %w", clean, err)
	}
	return os.ReadFile(real)
}

// readSnippet reads the anchored region (or the whole file when anchor is "").
func readSnippet(root, file, anchor string) (*snippet, error) {
	clean, err := cleanRootPath(file)
	if err != nil {
		return nil, err
	}
	data, err := readRootFile(root, clean)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	isMarker := func(l string) bool { return anchorStartRE.MatchString(l) || anchorEndRE.MatchString(l) }

	var kept []string
	var keptNums []int
	dropped := false // a marker line was dropped since the last kept line
	keep := func(l string, n int, marker bool) {
		if marker {
			dropped = true
			return
		}
		// A dropped marker between two blank lines would leave a double gap.
		if dropped && strings.TrimSpace(l) == "" && len(kept) > 0 && strings.TrimSpace(kept[len(kept)-1]) == "" {
			return
		}
		dropped = false
		kept, keptNums = append(kept, l), append(keptNums, n)
	}
	if anchor == "" {
		for i, l := range lines {
			keep(l, i+1, isMarker(l))
		}
	} else {
		openedAt := 0 // line of the ANCHOR opening the region we are in; 0 outside
		regions := 0
		for i, l := range lines {
			if m := anchorStartRE.FindStringSubmatch(l); m != nil && m[1] == anchor {
				if openedAt != 0 {
					return nil, fmt.Errorf("%s:%d: ANCHOR: %s inside the region it opened on line %d", clean, i+1, anchor, openedAt)
				}
				openedAt = i + 1
				dropped = true
				if len(kept) > 0 && strings.TrimSpace(kept[len(kept)-1]) != "" {
					keep("", 0, false) // a gap between two regions of one name
				}
				continue
			}
			if m := anchorEndRE.FindStringSubmatch(l); m != nil && m[1] == anchor {
				if openedAt == 0 {
					return nil, fmt.Errorf("%s:%d: ANCHOR_END: %s without a matching ANCHOR", clean, i+1, anchor)
				}
				openedAt = 0
				regions++
				dropped = true
				continue
			}
			if openedAt != 0 {
				keep(l, i+1, isMarker(l))
			}
		}
		if openedAt != 0 {
			return nil, fmt.Errorf("%s:%d: ANCHOR: %s has no ANCHOR_END", clean, openedAt, anchor)
		}
		if regions == 0 {
			return nil, fmt.Errorf("anchor %q not found in %s (anchors there: %s)", anchor, clean, listAnchors(lines))
		}
	}
	// Drop blank lines at either end.
	for len(kept) > 0 && strings.TrimSpace(kept[0]) == "" {
		kept, keptNums = kept[1:], keptNums[1:]
	}
	for len(kept) > 0 && strings.TrimSpace(kept[len(kept)-1]) == "" {
		kept, keptNums = kept[:len(kept)-1], keptNums[:len(keptNums)-1]
	}
	if len(kept) == 0 {
		if anchor != "" {
			return nil, fmt.Errorf("anchor %q in %s is empty", anchor, clean)
		}
		return nil, fmt.Errorf("%s is empty", clean)
	}
	kept = dedent(kept)
	return &snippet{
		Path:      clean,
		Code:      strings.Join(kept, "\n") + "\n",
		FirstLine: keptNums[0],
		LastLine:  keptNums[len(keptNums)-1],
		Lines:     keptNums,
	}, nil
}

func listAnchors(lines []string) string {
	seen := map[string]bool{}
	var names []string
	for _, l := range lines {
		if m := anchorStartRE.FindStringSubmatch(l); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// dedent removes the longest whitespace prefix common to every non-blank line.
func dedent(lines []string) []string {
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		lead := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = lead, false
			continue
		}
		for !strings.HasPrefix(lead, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			out[i] = ""
			continue
		}
		out[i] = strings.TrimPrefix(l, prefix)
	}
	return out
}

// languageOf picks a highlighting language from a file name.
func languageOf(name string) string {
	switch path.Ext(name) {
	case ".go":
		return "go"
	case ".sh", ".bash":
		return "sh"
	case ".json":
		return "json"
	case ".diff", ".patch":
		return "diff"
	case ".md":
		return "markdown"
	case ".c", ".h":
		return "c"
	case ".yml", ".yaml":
		return "yaml"
	}
	switch path.Base(name) {
	case "go.mod", "go.work":
		return "text"
	case "Makefile":
		return "make"
	case "run":
		return "sh"
	}
	return "text"
}

// goDeclarations names the top-level declarations of a Go file that a snippet
// shows: "func (e *Engine) pollLoop", "type Engine". A snippet from inside one
// function body is named "in func ...". It falls back to the first func or
// type line of the snippet when the file does not parse.
func goDeclarations(src []byte, sn *snippet) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, sn.Path, src, parser.SkipObjectResolution)
	if err != nil {
		return declarationsByLine(sn.Code)
	}
	shown := map[int]bool{}
	for _, n := range sn.Lines {
		shown[n] = true
	}
	var names []string
	var enclosing string
	for _, decl := range f.Decls {
		start, end := fset.Position(decl.Pos()).Line, fset.Position(decl.End()).Line
		if start > sn.LastLine || end < sn.FirstLine {
			continue
		}
		// A declaration counts as shown when its first line is in the
		// snippet; a snippet that starts inside a declaration is "in" it.
		if shown[start] {
			names = append(names, declNames(src, fset, decl)...)
		} else if start < sn.FirstLine && end >= sn.LastLine {
			if ns := declNames(src, fset, decl); len(ns) > 0 {
				enclosing = "in " + ns[0]
			}
		}
	}
	if len(names) == 0 && enclosing != "" {
		return []string{enclosing}
	}
	return names
}

func declNames(src []byte, fset *token.FileSet, decl ast.Decl) []string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		name := "func "
		if d.Recv != nil {
			from, to := fset.Position(d.Recv.Opening).Offset, fset.Position(d.Recv.Closing).Offset
			name += string(src[from:to+1]) + " "
		}
		return []string{name + d.Name.Name}
	case *ast.GenDecl:
		var out []string
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				out = append(out, "type "+s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					out = append(out, d.Tok.String()+" "+n.Name)
				}
			}
		}
		if d.Tok == token.CONST || d.Tok == token.VAR {
			// A block of constants is named by its first and a count.
			if len(out) > 1 {
				return []string{fmt.Sprintf("%s … (%d names)", out[0], len(out))}
			}
		}
		return out
	}
	return nil
}

var declLineRE = regexp.MustCompile(`^(func\s*(\([^)]*\)\s*)?[A-Za-z_]\w*|type\s+[A-Za-z_]\w*)`)

func declarationsByLine(code string) []string {
	for _, l := range strings.Split(code, "\n") {
		if m := declLineRE.FindString(l); m != "" {
			return []string{m}
		}
	}
	return nil
}

// includeSnippet reads the snippet an include directive names.
func (b *builder) includeSnippet(d directive) (*snippet, error) {
	if err := d.positionalOnly("include takes one STAGE/PATH[:ANCHOR]"); err != nil {
		return nil, err
	}
	if len(d.Positional) != 1 {
		return nil, d.errorf("want {{#include STAGE/PATH:ANCHOR}} or {{#include STAGE/PATH}}")
	}
	file, anchor := splitIncludeArg(d.Positional[0])
	sn, err := readSnippet(b.cfg.Root, file, anchor)
	if err != nil {
		return nil, d.errorf("%v", err)
	}
	return sn, nil
}

// includeRaw returns an include's lines alone, for a fenced code block that
// the chapter writes itself (mdBook's usage).
func (b *builder) includeRaw(d directive) (string, error) {
	sn, err := b.includeSnippet(d)
	if err != nil {
		return "", err
	}
	return sn.Code, nil
}

// includeHTML renders an include directive as a captioned listing: the
// path and the line span link to the file's source page (prefix leads from
// the page to the site root), and each line number to its line there.
func (b *builder) includeHTML(d directive, prefix string, print bool) (string, error) {
	sn, err := b.includeSnippet(d)
	if err != nil {
		return "", err
	}
	b.included[sn.Path] = true
	lang := languageOf(sn.Path)
	var decls []string
	if lang == "go" {
		src, err := readRootFile(b.cfg.Root, sn.Path)
		if err == nil {
			decls = goDeclarations(src, sn)
		}
	}
	page := prefix + sourcePage(sn.Path)
	var out strings.Builder
	out.WriteString(`<figure class="code">` + "\n")
	out.WriteString(`<figcaption><a class="path" href="` + escapeHTML(page+"#"+lineRange(sn.FirstLine, sn.LastLine)) + `" title="The whole file, these lines marked"><code class="path">` + escapeHTML(sn.Path) + `</code>`)
	if sn.FirstLine == sn.LastLine {
		fmt.Fprintf(&out, ` <span class="lines">line %d</span>`, sn.FirstLine)
	} else {
		fmt.Fprintf(&out, ` <span class="lines">lines %d–%d</span>`, sn.FirstLine, sn.LastLine)
	}
	out.WriteString("</a>")
	if len(decls) > 0 {
		shown := decls
		more := ""
		if len(shown) > 3 {
			shown, more = shown[:3], fmt.Sprintf(" and %d more", len(decls)-3)
		}
		out.WriteString(` <span class="decl">` + escapeHTML(strings.Join(shown, ", ")+more) + `</span>`)
	}
	out.WriteString("</figcaption>\n")
	opt := listingOptions{Numbers: sn.Lines}
	if !print {
		// On paper a line cannot be followed: print.html numbers its lines
		// and links the listing once, from its caption. (The links were a
		// fifth of print.html's elements, each one for the accessibility
		// checker to visit.)
		opt.Href = func(n int) string { return page + "#L" + strconv.Itoa(n) }
	}
	out.WriteString(b.hl.listing(sn.Code, lang, opt))
	out.WriteString("</figure>")
	return out.String(), nil
}
