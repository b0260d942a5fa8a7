package book

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func renderFixture(t *testing.T) *Site {
	t.Helper()
	site, err := Render(fixtureConfig(t))
	if err != nil {
		t.Fatalf("Render(fixture): %v", err)
	}
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
		"images/engine.svg", "index.html", "intro.html", "print.html", "records.html",
		"records/reference.json", "records/test.json", "stage0.html", "stage0/details.html", "stage1.html",
		"static/book.js", "static/chroma.css", "static/style.css",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("site files:\n got %v\nwant %v", names, want)
	}
	if !bytes.Equal(site.Files["index.html"], site.Files["intro.html"]) {
		t.Errorf("index.html is not the first chapter's page")
	}

	page := func(name string) string { return string(site.Files[name]) }
	tests := []struct {
		name string
		page string
		want []string
	}{
		{"sidebar marks the current chapter", "stage1.html", []string{
			`<a class="active" aria-current="page" href="stage1.html"><strong aria-hidden="true">2.</strong> Stage 1: the ring</a>`,
			`<li class="part-title">The stages`,
			`<li class="chapter-item draft"><span title="Not written yet"><strong aria-hidden="true">3.</strong> Stage 2: fences</span>`,
			`<a href="stage0/details.html"><strong aria-hidden="true">1.1.</strong> Inside the engine</a>`,
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
		}},
		{"highlighted Go", "stage0.html", []string{`<span class="kd">type</span>`}},
		{"highlighted diff", "stage1.html", []string{`<details class="unified-diff">`, `<span class="gd">`, `<span class="gi">`}},
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
	if len(a.Files) != len(b.Files) {
		t.Fatalf("renders made %d and %d files", len(a.Files), len(b.Files))
	}
	for name, data := range a.Files {
		if !bytes.Equal(data, b.Files[name]) {
			t.Errorf("%s differs between two renders of the same input", name)
		}
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
	if _, err := os.Stat(filepath.Join(cfg.OutDir, "index.html")); err == nil {
		t.Errorf("a failed build wrote %s", cfg.OutDir)
	}
}

func TestWriteSite(t *testing.T) {
	files := map[string][]byte{"index.html": []byte("<p>hi</p>"), "a/b.html": []byte("b")}

	dir := filepath.Join(t.TempDir(), "site")
	if err := WriteSite(dir, files); err != nil {
		t.Fatalf("WriteSite(new dir): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale.html"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSite(dir, files); err != nil {
		t.Fatalf("WriteSite(own dir): %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "stale.html")); !os.IsNotExist(err) {
		t.Errorf("WriteSite left a stale file behind")
	}

	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "precious.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSite(foreign, files); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("WriteSite(foreign dir) = %v; want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "precious.txt")); err != nil {
		t.Errorf("WriteSite touched a foreign directory: %v", err)
	}
}
