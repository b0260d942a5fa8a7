package book

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// symlinkRepo makes a repository with one stage whose files include
// symbolic links out of the repository and within it.
func symlinkRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	stage := filepath.Join(root, "stage0-mailbox")
	require.NoError(t, os.MkdirAll(stage, 0o755))
	files := map[string]string{
		"go.mod":     "module softgpu/stage0-mailbox\n",
		"softgpu.go": "package softgpu\n\n// ANCHOR: open\nfunc Open() {}\n// ANCHOR_END: open\n",
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(stage, name), []byte(text), 0o644))
	}
	for link, target := range map[string]string{
		"etc":        "/etc",
		"passwd.go":  "/etc/passwd",
		"alias.go":   "softgpu.go",
		"escape.go":  "../../" + filepath.Base(root) + "-elsewhere",
		"parent.txt": "../go.mod.outside",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(stage, link)))
	}
	return root
}

// TestIncludeNeverLeavesTheRepository: a symbolic link in a stage that
// points at /etc (or anywhere outside the root) is refused, whatever the
// path looks like; one that stays inside is followed.
func TestIncludeNeverLeavesTheRepository(t *testing.T) {
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Skip("no /etc/passwd to link to")
	}
	root := symlinkRepo(t)
	tests := []struct {
		file    string
		wantErr string // "" when the include must work
	}{
		{"stage0-mailbox/softgpu.go", ""},
		{"stage0-mailbox/alias.go", ""},
		{"stage0-mailbox/passwd.go", "leads outside the repository, to /etc/passwd"},
		{"stage0-mailbox/etc/passwd", "leads outside the repository, to /etc/passwd"},
		{"stage0-mailbox/etc/hostname", "leads outside the repository"},
		{"stage0-mailbox/../../etc/passwd", "leaves the repository"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			sn, err := readSnippet(root, tt.file, "")
			if tt.wantErr == "" {
				require.NoError(t, err, "readSnippet(%s)", tt.file)
				if !strings.Contains(sn.Code, "func Open") {
					t.Errorf("readSnippet(%s) = %q", tt.file, sn.Code)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("readSnippet(%s) = %v; want an error containing %q", tt.file, err, tt.wantErr)
			}
			if sn != nil && strings.Contains(sn.Code, "root:") {
				t.Errorf("readSnippet(%s) published a host file", tt.file)
			}
		})
	}

	// The source pages list the stage's files without following the links.
	files, err := sourceFiles(root, "stage0-mailbox")
	require.NoError(t, err, "sourceFiles")
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	if got, want := strings.Join(names, " "), "stage0-mailbox/go.mod stage0-mailbox/softgpu.go"; got != want {
		t.Errorf("sourceFiles = %s; want %s (links not followed)", got, want)
	}
}

func TestDiagram(t *testing.T) {
	tests := []struct {
		name    string
		svg     string // written as diagrams/d.svg; "" writes nothing
		src     string
		want    []string
		wantErr string
	}{
		{
			name: "inlined with its ids prefixed and the page's class",
			svg:  `<?xml version="1.0"?>` + "\n" + `<svg xmlns="http://www.w3.org/2000/svg" class="wide" viewBox="0 0 10 10"><title>A ring of eight slots</title><defs><marker id="a"/></defs><path marker-end="url(#a)"/><use href="#a"/></svg>`,
			src:  `{{#diagram d caption="A ring"}}`,
			want: []string{`<svg role="img" xmlns="http://www.w3.org/2000/svg" class="diagram wide"`, `<marker id="dg1-a"/>`, `url(#dg1-a)`, `href="#dg1-a"`, `<figcaption>A ring</figcaption>`},
		},
		{name: "missing file", src: `{{#diagram nosuch}}`, wantErr: "no diagram nosuch"},
		{name: "not XML", svg: `<svg xmlns="http://www.w3.org/2000/svg"><g></svg>`, src: `{{#diagram d}}`, wantErr: "not well-formed XML"},
		{name: "not SVG", svg: `<html></html>`, src: `{{#diagram d}}`, wantErr: "the root element is <html>; want <svg>"},
		{name: "a script", svg: `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`, src: `{{#diagram d}}`, wantErr: "may not carry a <script>"},
		{name: "a bad name", src: `{{#diagram ../d}}`, wantErr: "want {{#diagram NAME"},
		{name: "an unknown key", src: `{{#diagram d alt="x"}}`, wantErr: "unknown argument alt="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBuilder(t)
			b.cfg.BookDir = t.TempDir()
			if tt.svg != "" {
				require.NoError(t, os.MkdirAll(filepath.Join(b.cfg.BookDir, "diagrams"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(b.cfg.BookDir, "diagrams", "d.svg"), []byte(tt.svg), 0o644))
			}
			checkBlocks(t, b, tt.src+"\n", tt.want, tt.wantErr, "diagram")
		})
	}
}

func TestTimeline(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []string
		wantErr string
	}{
		{
			name: "a window and its provenance",
			src:  `{{#timeline trace=stage7 from=0 to=120 title="Gaps" caption="Commands and sleeps."}}`,
			want: []string{`<figure class="timeline">`, `<svg xmlns="http://www.w3.org/2000/svg" class="sgt-timeline"`, "<figcaption>Commands and sleeps.\n<p class=\"reproduce\">Trace ",
				`Trace <a href="traces/stage7.json">stage7.json</a> of <code>stage7-idle</code>, made by <code class="command">`,
				`(2026-11-30; AMD EPYC 7B13, 2 cores, linux/amd64)`},
		},
		{name: "missing trace", src: `{{#timeline trace=nosuch}}`, wantErr: "no trace nosuch: "},
		{name: "an empty window", src: `{{#timeline trace=stage7 from=50 to=10}}`, wantErr: "bad timeline window"},
		{name: "a window that shows no event", src: `{{#timeline trace=stage7 from=300 to=400}}`, wantErr: "shows no event in this window (its events span 0.00 to 215.05 µs)"},
		{name: "a window that is not a number", src: `{{#timeline trace=stage7 from=soon}}`, wantErr: "from=soon: want microseconds"},
		{name: "no trace named", src: `{{#timeline first=10}}`, wantErr: "missing trace="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBuilder(t)
			checkBlocks(t, b, tt.src+"\n", tt.want, tt.wantErr, "timeline")
		})
	}

	// The meta file is required: a timeline always says how it was made.
	b := newTestBuilder(t)
	b.cfg.BookDir = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(b.cfg.BookDir, "traces"), 0o755))
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "book", "traces", "stage7.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(b.cfg.BookDir, "traces", "stage7.json"), data, 0o644))
	x := expand(t, b, "{{#timeline trace=stage7}}\n")
	if len(x.Errs) != 1 || !strings.Contains(x.Errs[0].Error(), "has no stage7.meta.json") {
		t.Errorf("a trace without its meta file: errors = %v; want a refusal", x.Errs)
	}
}

func TestThemeTimeline(t *testing.T) {
	in := "<svg><style>\n.sgt-timeline .a{fill:#fff}\n@media (prefers-color-scheme: dark){\n.sgt-timeline .a{fill:#000}\n}\n</style><rect/></svg>"
	want := "<svg><style>\n.sgt-timeline .a{fill:#fff}\n" +
		`:root[data-theme="dark"] .sgt-timeline .a{fill:#000}` + "\n" +
		"@media (prefers-color-scheme: dark){\n" + `:root:not([data-theme="light"]) .sgt-timeline .a{fill:#000}` + "\n}\n</style><rect/></svg>"
	assert.Equal(t, want, themeTimeline(in), "themeTimeline")
}

func TestPlaceMarks(t *testing.T) {
	gaps := []string{"0", "3us", "30us", "300us", "3ms"}
	tests := []struct {
		name       string
		categories []string
		spec       string
		want       string // positions and labels
		wantErr    string
	}{
		{"idle budgets among the gaps, log between neighbours", gaps, "10us,50us:default,200us",
			"1.52 10µs; 2.22 default; 2.82 200µs", ""},
		{"on a category", gaps, "300us", "3.00 300µs", ""},
		{"linear from zero", gaps, "1.5us", "0.50 1.5µs", ""},
		{"sizes", []string{"4KiB", "64KiB", "1MiB"}, "16KiB", "0.50 16KiB", ""},
		{"names must match", []string{"copy", "compute"}, "compute", "1.00 compute", ""},
		{"outside the range", gaps, "10ms", "", "lies outside the categories' range 0 … 3ms"},
		{"another dimension", gaps, "4KiB", "", "is not a quantity like the categories"},
		{"a name that is not a category", []string{"copy", "compute"}, "fill", "", `"fill" is not a category of this chart`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marks, err := placeMarks(tt.categories, tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("placeMarks(%q) = %v; want an error containing %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, m := range marks {
				got = append(got, strconv.FormatFloat(m.Pos, 'f', 2, 64)+" "+m.Label)
			}
			assert.Equal(t, tt.want, strings.Join(got, "; "), "placeMarks(%q)", tt.spec)
		})
	}
}

// TestChartReadableOnAPhone: each drawing's smallest text, at the smallest
// scale the page draws it, is at least minChartText CSS px; a chart of a
// record with several passes draws whiskers, and marks where asked.
func TestChartReadableOnAPhone(t *testing.T) {
	b := newTestBuilder(t)
	_, html := expandOK(t, b, `{{#chart record=test stage=stage0-mailbox,stage1-ring bench=Gap/.* unit=ns/op x=gap marks="10us,50us,200us" title="A long title that a phone has to wrap onto a second line to fit it all"}}`)
	svgs := regexp.MustCompile(`(?s)<svg [^>]*class="chart (chart-[a-z]+)".*?</svg>`).FindAllStringSubmatch(html, -1)
	require.Equal(t, len(chartLayouts), len(svgs), "%d drawings; want one per layout (%d)", len(svgs), len(chartLayouts))
	sizeRE := regexp.MustCompile(`font-size="([0-9.]+)"`)
	for i, m := range svgs {
		l := chartLayouts[i]
		assert.Equal(t, l.Class, m[1], "drawing %d is %s", i, m[1])
		for _, s := range sizeRE.FindAllStringSubmatch(m[0], -1) {
			size, _ := strconv.ParseFloat(s[1], 64)
			if size*l.MinScale < minChartText {
				t.Errorf("%s: font-size %s drawn at %.2f px; want at least %v", l.Class, s[1], size*l.MinScale, minChartText)
			}
		}
		if !strings.Contains(m[0], `class="whisker"`) {
			t.Errorf("%s: no whiskers for a record of 3 passes", l.Class)
		}
		if n := strings.Count(m[0], `<g class="mark">`); n != 3 {
			t.Errorf("%s: %d marks; want 3", l.Class, n)
		}
	}
	if !strings.Contains(html, `whiskers span the lowest to the highest pass`) || !strings.Contains(html, "Median of 3 passes") {
		t.Errorf("the chart does not say what it shows:\n%s", html[strings.Index(html, "</svg>\n<p"):])
	}
}

func TestTableSpreadAndNoise(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name        string
		src         string
		want        []string
		noisyMarked []string // benchmarks whose row is marked noisy
	}{
		{
			name:        "default threshold",
			src:         "{{#table record=placed stage=stage7-idle bench=Gap/.* unit=ns/op}}",
			want:        []string{`>1.05 µs <span class="pm">±24%</span></td>`, `>31.1 µs <span class="pm">±0.8%</span></td>`, "(max − min)/median over 15%"},
			noisyMarked: []string{"Gap/gap=3us"},
		},
		{
			name: "a threshold of the chapter's own",
			src:  "{{#table record=placed stage=stage7-idle bench=Gap/.* unit=ns/op noisy=50%}}",
			want: []string{"(max − min)/median over 50%"},
		},
		{
			name: "one pass's value has no spread",
			src:  "{{#table record=placed stage=stage7-idle bench=Gap/.* unit=ns/op stat=pass2}}",
			want: []string{`>1.50 µs</td>`, `>time/op · pass 2</th>`, "Pass 2 of 5."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, html := expandOK(t, b, tt.src)
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("table lacks %q:\n%s", w, html)
				}
			}
			marked := regexp.MustCompile(`<code>([^<]+)</code> <span class="noisy-mark"`).FindAllStringSubmatch(html, -1)
			var got []string
			for _, m := range marked {
				got = append(got, m[1])
			}
			assert.Equal(t, strings.Join(tt.noisyMarked, " "), strings.Join(got, " "), "rows marked noisy: %v; want %v", got, tt.noisyMarked)
			if !strings.Contains(html, `Reproduce this: <code class="command">go run ./tools/cmd/record -name placed`) {
				t.Errorf("no reproduce line:\n%s", html)
			}
		})
	}
}

func TestParseStatAndNoisy(t *testing.T) {
	tests := []struct {
		args    string
		wantErr string
	}{
		{"stat=passN", "want best, median, both or passN"},
		{"stat=pass0", "want best, median, both or passN"},
		{"noisy=0", "want a spread such as 0.25"},
		{"noisy=lots", "want a spread such as 0.25"},
	}
	for _, tt := range tests {
		d, err := parseDirective("table " + tt.args)
		require.NoError(t, err)
		_, errStat := parseStat(d, true)
		_, errNoisy := parseNoisy(d)
		err = errStat
		if err == nil {
			err = errNoisy
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error %v; want %q", tt.args, err, tt.wantErr)
		}
	}
}

func TestSearchSections(t *testing.T) {
	doc := `<h1 id="top"><a class="anchor" href="#top">#</a>Stage 0</h1>
<p>The engine &amp; the host.</p>
<figure class="chart"><svg class="chart"><text>axis label</text></svg></figure>
<h2 id="code">The <code>pollLoop</code></h2>
<pre class="chroma listing"><code><span class="line"><span class="cl">func pollLoop()</span></span><span class="line"><span class="cl">return</span></span></code></pre>
<details class="unified-diff" data-search="skip"><summary>diff</summary><pre>+ added line</pre></details>
<h3>No id, no section</h3><p>tail</p>`
	got := pageSections(doc)
	want := []searchSection{
		{ID: "top", Title: "Stage 0", Text: "The engine & the host."},
		{ID: "code", Title: "The pollLoop", Text: "func pollLoop() return No id, no section tail"},
	}
	require.Equal(t, len(want), len(got), "pageSections = %+v; want %+v", got, want)
	for i := range want {
		if g := *got[i]; g.ID != want[i].ID || g.Title != want[i].Title || g.Text != want[i].Text {
			t.Errorf("section %d = %+v; want %+v", i, g, want[i])
		}
	}
}

func TestChapterLabels(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    string // title:label of every chapter
		wantErr string
	}{
		{
			name: "stages carry their number in the title; appendices are lettered",
			text: "# Summary\n\n[Opening](opening.md)\n\n- [Measuring](measuring.md)\n\n# Stages\n\n- [Stage 0: a mailbox](stage0-mailbox.md)\n- [Stage 7: idle](stage7-idle.md)\n    - [A section](stage7/more.md)\n\n# Appendix\n\n- [Records](appendix-records.md)\n- [The ABI](appendix-abi.md)\n",
			want: "Opening: Measuring: Stage 0: a mailbox: Stage 7: idle: A section: Records:A The ABI:B",
		},
		{
			name: "suffix chapters are appendices too",
			text: "# Summary\n\n- [One](one.md)\n\n[Glossary](glossary.md)\n",
			want: "One: Glossary:A",
		},
		{
			name:    "a stage's chapter must say which stage",
			text:    "# Summary\n\n- [Rings](stage1-ring.md)\n",
			wantErr: `SUMMARY.md:3: stage1-ring.md is the chapter for stage 1: its title must start "Stage 1", got "Rings"`,
		},
		{
			name:    "and the right one",
			text:    "# Summary\n\n- [Stage 2: rings](stage1-ring.md)\n",
			wantErr: `its title must start "Stage 1"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSummary("SUMMARY.md", []byte(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSummary = %v; want %q", err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, it := range s.Chapters() {
				got = append(got, it.Title+":"+it.Label)
			}
			assert.Equal(t, tt.want, strings.Join(got, " "), "labels")
		})
	}
}

// TestOneTitlePerChapter: the sidebar's title and the page's heading agree.
func TestOneTitlePerChapter(t *testing.T) {
	tests := []struct {
		name, summary, chapter, wantErr string
	}{
		{"the same", "- [Fences, and `waiters`](one.md)", "# Fences, and `waiters`\n", ""},
		{"the typographer's quotes are the same", "- [What \"idle\" costs](one.md)", "# What \"idle\" costs\n", ""},
		{"different", "- [Fences](one.md)", "# Fences that are never futile\n", `one.md:1: the chapter's heading "Fences that are never futile" differs from its title in SUMMARY.md (line 3) "Fences"`},
		{"none", "- [Fences](one.md)", "Text.\n", `one.md:1: the chapter has no # heading: start it with "# Fences"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(writeBook(t, map[string]string{"SUMMARY.md": "# Summary\n\n" + tt.summary + "\n", "one.md": tt.chapter}))
			if tt.wantErr == "" {
				require.NoError(t, err, "Render")
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Render = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

func TestLineRangeLinks(t *testing.T) {
	files := map[string][]byte{
		"src/a.go.html": []byte(`<span id="L1"></span><span id="L2"></span><span id="L3"></span>`),
		"page.html":     []byte(`<a href="src/a.go.html#L1-L3">ok</a><a href="src/a.go.html#L2">ok</a><a href="src/a.go.html#L2-L9">past the end</a>`),
	}
	broken := CheckLinks(files)
	if len(broken) != 1 || broken[0].Href != "src/a.go.html#L2-L9" {
		t.Errorf("CheckLinks = %v; want only the range past the end", broken)
	}
}

func TestListing(t *testing.T) {
	h := newHighlighter()
	html := h.listing("func f() {\n\treturn\n}\n", "go", listingOptions{Numbers: []int{7, 0, 9}, Href: func(n int) string { return "x.html#L" + strconv.Itoa(n) }})
	for _, w := range []string{
		`<pre class="chroma listing" style="--ln-digits: 1" tabindex="0" role="region" aria-label="Go code"><code>`,
		`<span class="line"><a class="ln" href="x.html#L7" data-n="7" aria-hidden="true" tabindex="-1"></a><span class="cl"><span class="kd">func</span>`,
		"<span class=\"line\"><span class=\"ln\"></span><span class=\"cl\">\t<span class=\"k\">return</span></span></span>", // line 0: a gap, no number
		`data-n="9"`,
	} {
		if !strings.Contains(html, w) {
			t.Errorf("listing lacks %q:\n%s", w, html)
		}
	}
	if n := strings.Count(html, `<span class="line"`); n != 3 {
		t.Errorf("%d lines; want 3:\n%s", n, html)
	}
	// The numbers are drawn by CSS, never text a reader copies.
	if regexp.MustCompile(`>[0-9]+</a>`).MatchString(html) {
		t.Errorf("a line number is text:\n%s", html)
	}
	css := string(h.css())
	if !strings.Contains(css, ".chroma .kd { color: light-dark(") {
		t.Errorf("chroma.css has no colours for both themes:\n%s", css[:min(len(css), 500)])
	}
	// Every colour is one a browser accepts: one invalid half of a
	// light-dark() drops the whole declaration, dark theme included.
	validColour := regexp.MustCompile(`^(#[0-9a-f]{6}|currentColor|transparent)$`)
	for _, m := range regexp.MustCompile(`light-dark\(([^,]+), ([^)]+)\)`).FindAllStringSubmatch(css, -1) {
		for _, c := range m[1:] {
			if !validColour.MatchString(c) {
				t.Errorf("chroma.css: %s has the colour %q, which is not CSS", m[0], c)
			}
		}
	}
}

func TestDiffOrder(t *testing.T) {
	paths := []string{"README.md", "bench_test.go", "device/ring.go", "go.mod", "driver/ring_test.go", "testdata/x.go", "softgpu.go"}
	var kinds []string
	for _, p := range paths {
		kinds = append(kinds, diffKind(p))
	}
	want := "prose test mechanism other test test mechanism"
	assert.Equal(t, want, strings.Join(kinds, " "), "kinds")
}

// A token drawn exactly as the code's own text gets no span: punctuation and
// plain names are half of a listing's tokens, and each span weighs on the
// page, its layout and the accessibility checker. Keywords keep theirs.
func TestPlainTokensAreBare(t *testing.T) {
	h := newHighlighter()
	html := h.highlight("x := f(y)\nreturn x\n", "go")
	for _, cls := range []string{"nx", "p"} {
		if !h.plain[cls] {
			t.Errorf("class %q is not plain; chroma's github styles draw it as the text", cls)
		}
		if strings.Contains(html, `class="`+cls+`"`) {
			t.Errorf("a %q token has a span:\n%s", cls, html)
		}
	}
	if !strings.Contains(html, `<span class="k">return</span>`) {
		t.Errorf("the keyword lost its span:\n%s", html)
	}
	if !strings.Contains(html, "</span>(y)\n") || !strings.Contains(html, "</span> x</code>") {
		t.Errorf("the plain tokens' text is not there as written:\n%s", html)
	}
	css := string(h.css())
	if strings.Contains(css, ".chroma .nx ") || strings.Contains(css, ".chroma .p ") {
		t.Errorf("chroma.css styles a class no token is given:\n%s", css)
	}
}

// pageText must be the stylesheet's light text colour, or a "plain" token
// would be drawn in a colour nobody checked.
func TestPageTextIsTheStylesheets(t *testing.T) {
	css, err := assets.ReadFile("assets/style.css")
	require.NoError(t, err)
	if want := "--fg: light-dark(" + pageText + ","; !strings.Contains(string(css), want) {
		t.Errorf("style.css does not set %q; pageText in highlight.go is stale", want)
	}
}

// TestSearchSectionsForGlossaryTerms: each glossary term is a section of the
// index of its own, titled by the term and found at its anchor.
func TestSearchSectionsForGlossaryTerms(t *testing.T) {
	doc := `<h1 id="glossary">Glossary</h1>
<p>Intro.</p>
<p id="term-aging"><strong>Aging.</strong> What keeps a channel from starving.</p>
<p id="term-bus-address"><strong>Bus address.</strong> How a command names pinned memory.</p>`
	got := pageSections(doc)
	want := []searchSection{
		{ID: "glossary", Title: "Glossary", Text: "Intro."},
		{ID: "term-aging", Title: "Aging", Text: "What keeps a channel from starving."},
		{ID: "term-bus-address", Title: "Bus address", Text: "How a command names pinned memory."},
	}
	require.Equal(t, len(want), len(got), "pageSections = %+v; want %+v", got, want)
	for i := range want {
		if g := *got[i]; g.ID != want[i].ID || g.Title != want[i].Title || g.Text != want[i].Text {
			t.Errorf("section %d = %+v; want %+v", i, g, want[i])
		}
	}
}
