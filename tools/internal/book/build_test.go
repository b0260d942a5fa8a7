package book

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func renderFixture(t *testing.T) *Site {
	t.Helper()
	site, err := Render(fixtureConfig(t))
	require.NoError(t, err, "Render(fixture)")
	return site
}

func TestRenderFixture(t *testing.T) {
	site := renderFixture(t)
	for _, l := range site.Broken {
		t.Errorf("broken link: %s", l)
	}
	var names []string
	for name := range site.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	want := []string{
		"diagrams/ring.svg", "diff/stage1-ring.html", "images/engine.svg", "index.html", "intro.html", "print.html", "records.html",
		"records/placed.json", "records/reference.json", "records/test.json", "search-index.js",
		"src/DESIGN.md.html", "src/index.html", "src/stage0-mailbox/device/engine.go.html", "src/stage0-mailbox/go.mod.html",
		"src/stage0-mailbox/index.html", "src/stage0-mailbox/softgpu.go.html",
		"src/stage1-ring/device/engine.go.html", "src/stage1-ring/device/ring.go.html", "src/stage1-ring/go.mod.html",
		"src/stage1-ring/index.html", "src/stage1-ring/softgpu.go.html",
		"stage0.html", "stage0/details.html", "stage1.html",
		"static/book.js", "static/chroma.css", "static/favicon.svg", "static/style.css",
		"traces/stage7.json", "traces/stage7.meta.json",
	}
	assert.Equal(t, strings.Join(want, " "), strings.Join(names, " "), "site files:\n got %v\nwant %v", names, want)
	assert.Equal(t, site.Files["intro.html"], site.Files["index.html"], "index.html is not the first chapter's page")

	page := func(name string) string { return string(site.Files[name]) }
	tests := []struct {
		name string
		page string
		want []string
	}{
		// Numbers mean one thing: no mdBook list numbers; appendices lettered.
		{"sidebar marks the current chapter", "stage1.html", []string{
			`<a class="active" aria-current="page" href="stage1.html">Stage 1: the ring</a>`,
			`<li class="part-title">The stages`,
			`<li class="chapter-item draft"><span title="Not written yet">Stage 2: fences</span>`,
			`<a href="stage0/details.html">Inside the engine</a>`,
			`<a href="records.html"><strong class="chapter-label">A</strong> Appendix: the records</a>`,
		}},
		{"a lettered chapter's heading carries its letter", "records.html", []string{
			`<a class="anchor" href="#appendix-the-records" aria-label="Link to this section">#</a><span class="chapter-label">A</span> Appendix: the records</h1>`,
			`<title>A. Appendix: the records · fixture</title>`,
		}},
		{"favicon, theme and search", "stage0.html", []string{
			`<link rel="icon" href="static/favicon.svg" type="image/svg+xml">`,
			`<meta name="color-scheme" content="light dark">`,
			`<button type="button" class="theme-toggle"`,
			`<input type="search" id="search-input"`,
			`<input type="checkbox" id="sidebar-toggle" class="sidebar-toggle" aria-label="Show or hide the table of contents" aria-controls="sidebar">`,
		}},
		{"a Markdown table scrolls in its frame", "intro.html", []string{
			"<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"Table\">\n<table>",
		}},
		{"a listing's caption links to its lines", "stage0.html", []string{
			`<a class="path" href="src/stage0-mailbox/device/engine.go.html#L8-L12"`,
			`<a class="ln" href="src/stage0-mailbox/device/engine.go.html#L8" data-n="8"`,
		}},
		{"a source page has line anchors", "src/stage0-mailbox/device/engine.go.html", []string{
			`<span class="line" id="L8"><a class="ln" href="#L8" data-n="8"`,
			`<a href="../../index.html">Source</a> / <a href="../index.html">stage0-mailbox</a> / device / engine.go</nav>`,
		}},
		{"a diagram inlined, its ids its own", "stage0.html", []string{
			`<figure class="diagram">`, `<svg style="min-width: 229px" class="diagram" role="img" xmlns="http://www.w3.org/2000/svg"`,
			`<marker id="dg1-arrow"`, `marker-end="url(#dg1-arrow)"`, `<figcaption>The ring: the engine owns the head, the host the tail.</figcaption>`,
		}},
		{"a timeline with how it was made", "stage1.html", []string{
			`<figure class="timeline">`, `class="sgt-timeline"`, `:root[data-theme="dark"] .sgt-timeline`,
			`made by <code class="command">go run ./tools/cmd/trace make -stage stage7-idle -bench &#39;Gap/gap=30us$&#39; -name stage7</code> at commit <code>89abcdef0123</code>`,
		}},
		{"records appendix", "records.html", []string{
			`<h3 id="record-placed">`,
			`<pre class="chroma command-block" tabindex="0" role="region" aria-label="Shell commands"><code>go run ./tools/cmd/record -name placed -stages stage4-nolock,stage7-idle -bench &#39;Quiet|Gap/gap=(3|30)us$&#39; -passes 5</code></pre>`,
			`<dt>rows re-run</dt><dd>1 of 6, because the canary moved during the row (tolerance 30%); 1 kept a pass whose canary never held still</dd>`,
			`<dt>commit</dt><dd><code>0123456789ab+dirty</code> <strong class="dirty"`,
			// A transcription says where its figures were copied from, not passes.
			"<h3 id=\"record-reference\">", "<dt>source</dt><dd>seed 004</dd>\n</dl>",
		}},
		{"checked claims show their figures", "intro.html", []string{
			`class="figure claim" title="Checked when the book is built: stage7-idle Quiet = 0.05 cores ÷ stage4-nolock Quiet = 2.00 cores gives 0.025× &lt; 0.1× (median of the per-pass ratios over the 4 of 5 passes in which both rows&#39; canaries agreed within 30% (one machine placement); record placed.json)">0.025×</span>`,
		}},
		{"print: cover, contents, diffs summarised", "print.html", []string{
			`<section class="print-cover">`, `<nav class="print-toc" aria-label="Contents">`,
			`<a href="#records"><span class="chapter-label">A</span> Appendix: the records</a>`,
			`<p class="diff-print-note">`,
		}},
		{"previous and next", "stage1.html", []string{
			`<a class="nav-prev" rel="prev" href="stage0/details.html"`,
			`<a class="nav-next" rel="next" href="records.html"`,
		}},
		{"on this page", "stage0.html", []string{
			`<nav class="page-toc" aria-label="On this page">`,
			`<li class="toc-h2"><a href="#the-engine">The engine</a></li>`,
		}},
		{"heading anchors", "stage0.html", []string{
			`<h2 id="the-engine"><a class="anchor" href="#the-engine" aria-label="Link to this section">#</a>The engine</h2>`,
		}},
		{"a page in a subdirectory links up", "stage0/details.html", []string{
			`<link rel="stylesheet" href="../static/style.css">`,
			`<a href="../stage0.html#the-api">the chapter</a>`,
			`<img src="../images/engine.svg"`,
			`href="../records/test.json"`,
			`<a class="nav-prev" rel="prev" href="../stage0.html"`,
		}},
		{"chapter links become .html", "intro.html", []string{
			`<a href="stage0.html#the-engine">its engine</a>`,
			`<a href="records.html#record-placed">the placed record</a>`,
		}},
		{"print.html: ids prefixed, links in-page", "print.html", []string{
			`<section class="print-chapter" id="stage0">`,
			`<h2 id="stage0--the-engine">`,
			`<a href="#stage0--the-engine">its engine</a>`,
			`<a href="#stage0-details--the-poll-loop">the details</a>`,
			`<a href="#stage0--the-api">the chapter</a>`,
			`<img src="images/engine.svg"`,
			`href="records/test.json"`,
			`id="intro--fn:1"`,
			// The records appendix makes its own ids, outside Markdown.
			`<h3 id="records--record-placed"><a class="anchor" href="#records--record-placed"`,
			`<a href="#records--record-placed">the placed record</a>`,
		}},
		{"highlighted Go", "stage0.html", []string{`<span class="kd">type</span>`}},
		{"diff: files linked from the chapter's table to the diff's own page", "stage1.html", []string{
			`<a href="diff/stage1-ring.html#diff-stage1-ring--device-ring-go"><code>device/ring.go</code></a>`,
			`<a class="diff-page" href="diff/stage1-ring.html">`,
		}},
		{"diff page: Go highlighted in the hunks, linked to the source pages", "diff/stage1-ring.html", []string{
			`<a href="#diff-stage1-ring--device-ring-go"><code>device/ring.go</code></a>`,
			`<details class="diff-file mechanism" id="diff-stage1-ring--device-ring-go" open>`,
			`<span class="line diff-add"><a class="ln" href="../src/stage1-ring/device/ring.go.html#L1" data-n="1"`,
			`<span class="diff-sign" aria-hidden="true">+</span><span class="cl"><span class="kn">package</span>`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := page(tt.page)
			for _, w := range tt.want {
				if !strings.Contains(p, w) {
					t.Errorf("%s lacks %q", tt.page, w)
				}
			}
		})
	}
	if strings.Contains(page("print.html"), `class="diff-file`) {
		t.Errorf("print.html prints a diff's hunks; want its table only")
	}
	if strings.Contains(page("stage1.html"), `class="diff-file`) {
		t.Errorf("stage1.html carries its diff's hunks; want them on the diff's own page")
	}
	if !strings.Contains(page("search-index.js"), `"t":"Stage 1: the ring"`) {
		t.Errorf("search-index.js lacks the chapter Stage 1: the ring")
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".html") || strings.HasSuffix(name, ".css") || strings.HasSuffix(name, ".js") {
			for _, external := range []string{"http://", "https://"} {
				if p := page(name); strings.Contains(p, `src="`+external) || strings.Contains(p, `href="`+external) || strings.Contains(p, "url("+external) {
					t.Errorf("%s loads something from the network", name)
				}
			}
		}
	}
}

// TestDeterministic renders the fixture twice and compares every byte.
func TestDeterministic(t *testing.T) {
	a, b := renderFixture(t), renderFixture(t)
	require.Equal(t, len(b.Files), len(a.Files), "renders made %d and %d files", len(a.Files), len(b.Files))
	for name, data := range a.Files {
		assert.Equal(t, b.Files[name], data, "%s differs between two renders of the same input", name)
	}
}

// TestBuildReportsEveryError checks that one build reports the errors of
// every chapter, each with its file and line.
func TestBuildReportsEveryError(t *testing.T) {
	cfg := writeBook(t, map[string]string{
		"SUMMARY.md": "# Summary\n\n- [One](one.md)\n- [Two](two.md)\n- [Three](three.md)\n",
		"one.md":     "# One\n\n{{#include stage0-mailbox/device/engine.go:nosuch}}\n",
		"two.md":     "# Two\n\nText.\n\nA {{#value record=nosuch stage=a bench=b unit=ns/op}} figure.\n",
	})
	_, err := Build(cfg)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("Build error = %v; want a *BuildError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"one.md:3: {{#include stage0-mailbox/device/engine.go:nosuch}}: anchor \"nosuch\" not found",
		"two.md:5: {{#value record=nosuch stage=a bench=b unit=ns/op}}: unknown record \"nosuch\"",
		"SUMMARY.md:5: chapter three.md:",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Build error lacks %q:\n%s", want, msg)
		}
	}
	_, err = os.Stat(filepath.Join(cfg.OutDir, "index.html"))
	assert.Error(t, err, "a failed build wrote %s", cfg.OutDir)
}

func TestWriteSite(t *testing.T) {
	files := map[string][]byte{"index.html": []byte("<p>hi</p>"), "a/b.html": []byte("b")}

	dir := filepath.Join(t.TempDir(), "site")
	require.NoError(t, WriteSite(dir, files), "WriteSite(new dir)")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stale.html"), nil, 0o644))
	require.NoError(t, WriteSite(dir, files), "WriteSite(own dir)")
	if _, err := os.Stat(filepath.Join(dir, "stale.html")); !os.IsNotExist(err) {
		t.Errorf("WriteSite left a stale file behind")
	}

	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious.txt"), []byte("x"), 0o644))
	if err := WriteSite(foreign, files); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("WriteSite(foreign dir) = %v; want a refusal", err)
	}
	_, err := os.Stat(filepath.Join(foreign, "precious.txt"))
	assert.NoError(t, err, "WriteSite touched a foreign directory")
}

// TestWriteSiteFailsMarked checks a site whose writing stops part-way (here
// a file in the way of a directory; in life a kill) still has the marker,
// so that the next build may replace it.
func TestWriteSiteFailsMarked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	bad := map[string][]byte{"a": []byte("file"), "a/b.html": []byte("b")}
	require.Error(t, WriteSite(dir, bad), "WriteSite(a file where a directory goes)")
	_, err := os.Stat(filepath.Join(dir, siteMarker))
	require.NoError(t, err, "a site left half written has no marker")
	require.NoError(t, WriteSite(dir, map[string][]byte{"index.html": nil}), "WriteSite(half-written site)")
}

// TestBuildStopsWhenCancelled checks a build whose context has ended stops
// and writes nothing.
func TestBuildStopsWhenCancelled(t *testing.T) {
	cfg := fixtureConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg.Context = ctx
	cfg.OutDir = filepath.Join(t.TempDir(), "site")
	if _, err := Build(cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("Build(cancelled) = %v; want context.Canceled", err)
	}
	_, err := os.Stat(cfg.OutDir)
	assert.True(t, os.IsNotExist(err), "a cancelled build wrote %s (%v)", cfg.OutDir, err)
}
