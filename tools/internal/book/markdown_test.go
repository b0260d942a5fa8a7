package book

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renderChapterText expands and renders one chapter's text as its own page
// would be, returning the body HTML.
func renderChapterText(t *testing.T, src string) string {
	t.Helper()
	b := newTestBuilder(t)
	x := expand(t, b, src)
	for _, err := range x.Errs {
		t.Fatalf("expand: %v", err)
	}
	html, _, err := b.md.render(x.Markdown, linkMode{chapterPath: "test.md", pagePath: "test.html"})
	require.NoError(t, err)
	return string(fillPlaceholders(html, x.Blocks))
}

func TestBlockDirectivePlacement(t *testing.T) {
	const include = "{{#include stage0-mailbox/device/engine.go:body}}"
	tests := []struct {
		name string
		src  string
		want []string // in order
	}{
		{"between paragraphs, no blank lines", "Before.\n" + include + "\nAfter.\n",
			[]string{"<p>Before.</p>", `<figure class="code">`, "</figure>", "<p>After.</p>"}},
		{"inside a list item", "- item one\n\n  " + include + "\n\n- item two\n",
			[]string{"<li>", "<p>item one</p>", `<figure class="code">`, "</figure>", "</li>", "<li>", "item two"}},
		{"a blank line inside the code survives", "{{#include stage0-mailbox/softgpu.go}}\n",
			[]string{`<pre class="chroma listing"`, "package", "Open", "</pre>", "</figure>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html := renderChapterText(t, tt.src)
			rest := html
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q missing or out of order in:\n%s", w, html)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(html, "softgpu-directive") {
				t.Errorf("a placeholder survived:\n%s", html)
			}
		})
	}
}

func TestHeadingIDs(t *testing.T) {
	html := renderChapterText(t, "# Stage 0: the mailbox\n\n## Why `Gosched`?\n\n## Why `Gosched`?\n\n## Custom {#my-id}\n\n## Cost: {{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op}}\n")
	for _, want := range []string{
		`<h1 id="stage-0-the-mailbox">`,
		`<h2 id="why-gosched">`,
		`<h2 id="why-gosched-1">`,
		`<h2 id="my-id">`,
		`<h2 id="cost-178-µs">`, // the median, as every figure unless stat= says otherwise
	} {
		if !strings.Contains(html, want) {
			t.Errorf("no %s in:\n%s", want, html)
		}
	}
}

func TestRewriteLinks(t *testing.T) {
	chapters := map[string]string{"intro.md": "intro.html", "stages/s0.md": "stages/s0.html"}
	printIDs := map[string]string{"intro.md": "intro", "stages/s0.md": "stages-s0"}
	tests := []struct {
		chapter, page string
		print         bool
		dest, want    string
	}{
		{"intro.md", "intro.html", false, "stages/s0.md#x", "stages/s0.html#x"},
		{"stages/s0.md", "stages/s0.html", false, "../intro.md", "../intro.html"},
		{"stages/s0.md", "stages/s0.html", false, "#local", "#local"},
		{"intro.md", "intro.html", false, "notes.md", "notes.md"},
		{"intro.md", "intro.html", false, "https://go.dev/x.md", "https://go.dev/x.md"},
		{"intro.md", "intro.html", false, "records/test.json", "records/test.json"},
		{"stages/s0.md", "print.html", true, "../intro.md#why", "#intro--why"},
		{"stages/s0.md", "print.html", true, "../intro.md", "#intro"},
		{"stages/s0.md", "print.html", true, "#local", "#stages-s0--local"},
		{"stages/s0.md", "print.html", true, "../records/test.json", "records/test.json"},
	}
	for _, tt := range tests {
		m := linkMode{chapterPath: tt.chapter, pagePath: tt.page, chapters: chapters, printIDs: printIDs, print: tt.print}
		assert.Equal(t, tt.want, m.rewrite(tt.dest), "rewrite(%s in %s, print=%v)", tt.dest, tt.chapter, tt.print)
	}
}

// TestHeadingTextIsPlain checks the "On this page" text of headings that the
// typographer rewrites: it must be the characters, not their entities, or
// the page template escapes the entity a second time ("engine&amp;rsquo;s").
func TestHeadingTextIsPlain(t *testing.T) {
	m := &markdown{hl: newHighlighter()}
	tests := []struct{ src, want string }{
		{"## The engine's side\n", "The engine’s side"},
		{"## Why \"7\" -- before 5...\n", "Why “7” – before 5…"},
		{"## `code` & more\n", "code & more"},
	}
	for _, tt := range tests {
		_, headings, err := m.render([]byte(tt.src), linkMode{chapterPath: "test.md", pagePath: "test.html"})
		require.NoError(t, err)
		if len(headings) != 1 || headings[0].Text != tt.want {
			t.Errorf("render(%q) headings = %+v; want one with text %q", tt.src, headings, tt.want)
		}
	}
}

// TestGlossaryTermAnchors: in the glossary, a paragraph that opens with a
// bold term ending in a full stop defines that term, and gets an id of its
// own (#term-…) so a chapter or a reader can link to one term; elsewhere a
// bold opening is only emphasis.
func TestGlossaryTermAnchors(t *testing.T) {
	b := newTestBuilder(t)
	src := "# Glossary\n\n**Adaptive budget.** A hybrid.\n\n**Budget (idle).** How long.\n\n**Adaptive budget.** Again.\n\nPlain **bold.** text.\n"
	for _, tt := range []struct {
		mode linkMode
		want []string
		not  []string
	}{
		{linkMode{chapterPath: "glossary.md", pagePath: "glossary.html"},
			[]string{`<p id="term-adaptive-budget"><strong>Adaptive budget.</strong>`, `<p id="term-budget-idle"><strong>Budget (idle).</strong>`, `<p id="term-adaptive-budget-1">`, "<p>Plain <strong>bold.</strong> text.</p>"}, nil},
		{linkMode{chapterPath: "glossary.md", pagePath: printPage, print: true, printIDs: map[string]string{"glossary.md": "glossary"}},
			[]string{`<p id="glossary--term-adaptive-budget">`}, nil},
		{linkMode{chapterPath: "stage0.md", pagePath: "stage0.html"},
			[]string{"<p><strong>Adaptive budget.</strong> A hybrid.</p>"}, []string{`id="term-`}},
	} {
		html, _, err := b.md.render([]byte(src), tt.mode)
		require.NoError(t, err)
		for _, w := range tt.want {
			assert.Contains(t, string(html), w, "%s", tt.mode.chapterPath)
		}
		for _, w := range tt.not {
			assert.NotContains(t, string(html), w, "%s", tt.mode.chapterPath)
		}
	}
}
