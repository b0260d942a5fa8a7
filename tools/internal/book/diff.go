package book

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"softgpu/tools/internal/stages"
)

// This file implements {{#diff STAGE}} and {{#diff A B}}: what a stage
// changed, as a table of files with their added and removed line counts and
// the whole unified diff, highlighted and folded in a <details>. The diff is
// normalised (each stage's module path replaced by a placeholder) by package
// stages, so only the mechanism shows.

// Differ gives the book stage diffs. The build uses StagesDiffer; tests use
// a fake.
type Differ interface {
	// Predecessor returns the stage that stage was copied from.
	Predecessor(stage string) (string, error)
	// Diff returns the normalised diff from stage a to stage b.
	Diff(a, b string) (*stages.Diff, error)
}

// StagesDiffer diffs the stage directories under Root with package stages,
// each pair once per build.
type StagesDiffer struct {
	Root string

	mu    sync.Mutex
	cache map[[2]string]*stages.Diff // guarded by mu
}

func (s *StagesDiffer) Predecessor(stage string) (string, error) {
	st, ok := stages.Lookup(stage)
	if !ok {
		return "", fmt.Errorf("unknown stage %q (stages: %s)", stage, strings.Join(stages.Dirs(stages.Order), ", "))
	}
	if st.Predecessor == "" {
		return "", fmt.Errorf("%s is the first stage: it has no predecessor to diff against", stage)
	}
	return st.Predecessor, nil
}

func (s *StagesDiffer) Diff(a, b string) (*stages.Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := [2]string{a, b}
	if d, ok := s.cache[key]; ok {
		return d, nil
	}
	for _, dir := range []string{a, b} {
		if err := stages.CheckExists(s.Root, dir); err != nil {
			return nil, err
		}
	}
	d, err := stages.DiffStages(s.Root, a, b)
	if err != nil {
		return nil, err
	}
	if s.cache == nil {
		s.cache = map[[2]string]*stages.Diff{}
	}
	s.cache[key] = d
	return d, nil
}

// diffHTML renders a diff directive. In print the hunks are left out: the
// table of changed files summarises the diff, which is on the chapter's page.
func (b *builder) diffHTML(d directive, prefix string, print bool) (string, error) {
	if err := d.positionalOnly("want {{#diff STAGE}} or {{#diff A B}}"); err != nil {
		return "", err
	}
	if b.cfg.Differ == nil {
		return "", d.errorf("no stage differ configured")
	}
	var from, to string
	switch len(d.Positional) {
	case 1:
		to = d.Positional[0]
		pred, err := b.cfg.Differ.Predecessor(to)
		if err != nil {
			return "", d.errorf("%v", err)
		}
		from = pred
	case 2:
		from, to = d.Positional[0], d.Positional[1]
	default:
		return "", d.errorf("want {{#diff STAGE}} or {{#diff A B}}")
	}
	diff, err := b.cfg.Differ.Diff(from, to)
	if err != nil {
		return "", d.errorf("%v", err)
	}

	var out strings.Builder
	added, removed := 0, 0
	for _, f := range diff.Files {
		added += f.Added
		removed += f.Removed
	}
	out.WriteString(`<figure class="stage-diff">` + "\n")
	fmt.Fprintf(&out, "<figcaption>From <code>%s</code> to <code>%s</code>: %d files changed, +%d −%d lines (module paths normalised); the mechanism's files first</figcaption>\n",
		escapeHTML(from), escapeHTML(to), len(diff.Files), added, removed)
	if len(diff.Files) == 0 {
		out.WriteString("<p>No differences.</p>\n</figure>")
		return out.String(), nil
	}
	files := slices.Clone(diff.Files)
	slices.SortStableFunc(files, func(x, y stages.FileDiff) int { return diffRank(x.Path) - diffRank(y.Path) })
	id := func(p string) string {
		return "diff-" + to + "--" + slugify(strings.NewReplacer("/", "-", ".", "-").Replace(p))
	}

	page := diffPageName(from, to, len(d.Positional) == 2)
	if print {
		out.WriteString(diffTable(files, func(string) string { return "" }))
		out.WriteString(`<p class="diff-print-note">The diff itself is on its own page of the book's site, and <code>go run ./tools/cmd/stages diff ` + escapeHTML(to) + "</code> prints it.</p>\n</figure>")
		return out.String(), nil
	}
	if _, done := b.diffParts[page]; !done {
		b.diffPages(page, from, to, diff, files, id, added, removed)
	}
	partOf := b.diffParts[page]
	out.WriteString(diffTable(files, func(p string) string { return prefix + partOf[p] + "#" + id(p) }))
	fmt.Fprintf(&out, "<p class=\"diff-link\"><a class=\"diff-page\" href=\"%s\">The whole diff, %s → %s, file by file</a>: the mechanism's files open, tests and READMEs folded.</p>\n</figure>",
		escapeHTML(prefix+page), escapeHTML(from), escapeHTML(to))
	return out.String(), nil
}

// diffPages writes the diff's own page, once per pair of stages: the table
// of files and each file's hunks, in as many parts (page, page-2, …) as
// keep every part under diffPartBudget (weight.go), a file's hunks never
// split. It records which part holds each file in b.diffParts[page].
func (b *builder) diffPages(page, from, to string, diff *stages.Diff, files []stages.FileDiff, id func(string) string, added, removed int) {
	pp := rootPrefix(page)
	hunks := splitUnified(diff.Unified)
	var blocks []string
	for _, f := range files {
		var blk strings.Builder
		open := ""
		if diffRank(f.Path) < 2 {
			open = " open"
		}
		path, stage := f.Path, to
		if f.Status == "removed" {
			stage = from
		}
		src := pp + sourcePage(stage+"/"+path)
		fmt.Fprintf(&blk, `<details class="diff-file %s" id="%s"%s>`+"\n"+`<summary><code>%s</code> <span class="diff-status">%s</span> <span class="added">+%d</span> <span class="removed">−%d</span></summary>`+"\n",
			diffKind(f.Path), escapeHTML(id(f.Path)), open, escapeHTML(f.Path), escapeHTML(f.Status), f.Added, f.Removed)
		if f.Binary {
			blk.WriteString("<p>Binary file.</p>\n</details>\n")
		} else {
			blk.WriteString(b.hunksHTML(hunks[f.Path], languageOf(f.Path), src))
			blk.WriteString("</details>\n")
		}
		blocks = append(blocks, blk.String())
	}
	parts := packParts(blocks, diffPartBudget)
	names := make([]string, len(parts))
	partOf := map[string]string{}
	for k, part := range parts {
		names[k] = partPageName(page, k)
		for _, i := range part {
			partOf[files[i].Path] = names[k]
		}
	}
	partsNav := func(k int, where string) string {
		if len(parts) == 1 {
			return ""
		}
		var nav strings.Builder
		fmt.Fprintf(&nav, "<nav class=\"diff-parts\" aria-label=\"Parts of this diff, %s\"><p>This diff is long, so it is cut into %d pages, each under 1 MB:", where, len(parts))
		for j := range parts {
			label := fmt.Sprintf("part %d", j+1)
			if j == k {
				fmt.Fprintf(&nav, " <strong aria-current=\"page\">%s</strong>", label)
			} else {
				fmt.Fprintf(&nav, " <a href=\"%s\">%s</a>", escapeHTML(path.Base(names[j])), label)
			}
		}
		nav.WriteString("</p></nav>\n")
		return nav.String()
	}
	if b.diffs == nil {
		b.diffs = map[string]diffPage{}
		b.diffParts = map[string]map[string]string{}
	}
	b.diffParts[page] = partOf
	for k, part := range parts {
		var dp strings.Builder
		fmt.Fprintf(&dp, "<nav class=\"breadcrumbs\" aria-label=\"Breadcrumbs\"><a href=\"%s\">Source</a> / <a href=\"%s\">%s</a> / the diff from %s</nav>\n",
			escapeHTML(pp+srcDir+"/index.html"), escapeHTML(pp+srcDir+"/"+to+"/index.html"), escapeHTML(to), escapeHTML(from))
		title := "Diff " + from + " → " + to
		if len(parts) > 1 {
			fmt.Fprintf(&dp, "<h1>The diff from <code>%s</code> to <code>%s</code>, part %d of %d</h1>\n", escapeHTML(from), escapeHTML(to), k+1, len(parts))
			title += fmt.Sprintf(", part %d of %d", k+1, len(parts))
		} else {
			fmt.Fprintf(&dp, "<h1>The diff from <code>%s</code> to <code>%s</code></h1>\n", escapeHTML(from), escapeHTML(to))
		}
		fmt.Fprintf(&dp, "<p>%d files changed, +%d −%d lines (module paths normalised); the mechanism's files first and open, tests and READMEs folded.</p>\n", len(diff.Files), added, removed)
		dp.WriteString(partsNav(k, "above"))
		dp.WriteString(diffTable(files, func(p string) string {
			if partOf[p] == names[k] {
				return "#" + id(p)
			}
			return path.Base(partOf[p]) + "#" + id(p)
		}))
		for _, i := range part {
			dp.WriteString(blocks[i])
		}
		dp.WriteString(partsNav(k, "below"))
		b.diffs[names[k]] = diffPage{title: title, content: dp.String()}
	}
}

// diffPage is a stage diff's own page: a chapter shows the table of changed
// files and links here, so that no chapter carries its diff's hunks (stage
// 9's page was 5 MB with its diff, more than a phone's tab would hold).
type diffPage struct {
	title, content string
}

// diffPageName is the site path of the diff from a to b: diff/B.html for a
// stage against its predecessor, diff/A--B.html for any other pair.
func diffPageName(a, b string, pair bool) string {
	if pair {
		return "diff/" + a + "--" + b + ".html"
	}
	return "diff/" + b + ".html"
}

// diffTable is the table of a diff's files; link gives the href of a
// file's hunks, "" for none.
func diffTable(files []stages.FileDiff, link func(path string) string) string {
	var out strings.Builder
	out.WriteString(scrollRegion("table-wrap", "Files changed") + `<table class="diffstat">` + "\n<thead><tr><th>file</th><th>status</th><th class=\"num\">added</th><th class=\"num\">removed</th></tr></thead>\n<tbody>\n")
	for _, f := range files {
		add, rem := fmt.Sprintf("+%d", f.Added), fmt.Sprintf("−%d", f.Removed)
		if f.Binary {
			add, rem = "binary", ""
		}
		name := `<code>` + escapeHTML(f.Path) + `</code>`
		if href := link(f.Path); href != "" {
			name = `<a href="` + escapeHTML(href) + `">` + name + `</a>`
		}
		fmt.Fprintf(&out, `<tr class="%s %s"><td>%s</td><td>%s</td><td class="num added">%s</td><td class="num removed">%s</td></tr>`+"\n",
			escapeHTML(f.Status), diffKind(f.Path), name, escapeHTML(f.Status), add, rem)
	}
	out.WriteString("</tbody>\n</table></div>\n")
	return out.String()
}

// diffRank orders a diff's files: the mechanism (Go, not tests) first, then
// other files, then tests, then READMEs and other prose.
func diffRank(p string) int {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, ".md"):
		return 3
	case strings.HasSuffix(base, "_test.go") || strings.Contains("/"+p, "/testdata/"):
		return 2
	case strings.HasSuffix(base, ".go"):
		return 0
	}
	return 1
}

func diffKind(p string) string {
	return [...]string{"mechanism", "other", "test", "prose"}[diffRank(p)]
}

// splitUnified cuts a unified diff into its files' hunks: the lines from
// each file's first "@@" to the next "diff --git", keyed by path.
func splitUnified(unified string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	inHunks := false
	for _, l := range strings.Split(unified, "\n") {
		if rest, ok := strings.CutPrefix(l, "diff --git a/"); ok {
			cur, _, _ = strings.Cut(rest, " b/")
			inHunks = false
			continue
		}
		if strings.HasPrefix(l, "@@") {
			inHunks = true
		}
		if inHunks && l != "" {
			out[cur] = append(out[cur], l)
		}
	}
	return out
}

var hunkHeaderRE = regexp.MustCompile(`^@@ -[0-9]+(?:,[0-9]+)? \+([0-9]+)(?:,[0-9]+)? @@`)

// hunksHTML renders one file's hunks as a listing: each hunk's lines
// highlighted in the file's language as one text, so a comment or string
// spanning lines is coloured right; + and − lines marked; the new file's
// line numbers linked to its source page.
func (b *builder) hunksHTML(lines []string, lang, src string) string {
	var out strings.Builder
	out.WriteString(preOpen("chroma listing diff", "--ln-digits: 4", lang))
	for i := 0; i < len(lines); {
		m := hunkHeaderRE.FindStringSubmatch(lines[i])
		if m == nil {
			i++
			continue
		}
		newLine, _ := strconv.Atoi(m[1])
		out.WriteString(`<span class="line diff-hunk"><span class="ln"></span><span class="cl">` + escapeHTML(lines[i]) + "</span></span>")
		i++
		start := i
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
			i++
		}
		body := lines[start:i]
		var code strings.Builder
		for _, l := range body {
			if strings.HasPrefix(l, `\`) {
				code.WriteString("\n")
				continue
			}
			code.WriteString(l[min(1, len(l)):] + "\n")
		}
		tokens := b.hl.tokenLines(code.String(), lang)
		for k, l := range body {
			var sign, class string
			switch {
			case strings.HasPrefix(l, "+"):
				sign, class = "+", "diff-add"
			case strings.HasPrefix(l, "-"):
				sign, class = "−", "diff-del"
			case strings.HasPrefix(l, `\`):
				fmt.Fprintf(&out, `<span class="line diff-note"><span class="ln"></span><span class="cl">%s</span></span>`, escapeHTML(l))
				continue
			default:
				sign, class = " ", "diff-ctx"
			}
			out.WriteString(`<span class="line ` + class + `">`)
			if sign == "−" {
				out.WriteString(`<span class="ln"></span>`)
			} else {
				n := strconv.Itoa(newLine)
				out.WriteString(`<a class="ln" href="` + escapeHTML(src+"#L"+n) + `" data-n="` + n + `" aria-hidden="true" tabindex="-1"></a>`)
				newLine++
			}
			out.WriteString(`<span class="diff-sign" aria-hidden="true">` + sign + `</span><span class="cl">`)
			if k < len(tokens) {
				b.hl.writeTokens(&out, tokens[k])
			}
			out.WriteString("</span></span>")
		}
	}
	out.WriteString("</code></pre>\n")
	return out.String()
}
