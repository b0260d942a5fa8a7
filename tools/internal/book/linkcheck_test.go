package book

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckLinks(t *testing.T) {
	page := func(body string) []byte {
		return []byte("<!DOCTYPE html><html><body>" + body + "</body></html>")
	}
	site := map[string][]byte{
		"a.html":           page(`<h1 id="top">A</h1><h2 id="x y">spaced</h2>`),
		"dir/b.html":       page(`<h2 id="b-sec">B</h2><a name="legacy"></a>`),
		"records/r.json":   []byte("{}"),
		"static/style.css": []byte(""),
	}
	tests := []struct {
		name       string
		page       string
		body       string
		wantBroken []string // "href: reason substring"; empty means every link resolves
	}{
		{"good links", "index.html", `<a href="a.html">a</a> <a href="a.html#top">t</a> <a href="dir/b.html#b-sec">b</a>
			<a href="#here">h</a><p id="here"></p> <a href="dir/b.html#legacy">l</a> <a href="a.html#x%20y">s</a>
			<a href='records/r.json'>r</a> <link rel="stylesheet" href="static/style.css">
			<a href="https://example.com/nosuch">ext</a> <a href="mailto:x@y">m</a> <a href="#">top</a>`, nil},
		{"relative from a subdirectory", "dir/c.html", `<a href="../a.html#top">a</a> <a href="b.html">b</a>`, nil},
		{"broken page link", "index.html", `<a href="nosuch.html">x</a>`, []string{"nosuch.html: no such file"}},
		{"link to a .md that is not a chapter", "index.html", `<a href="notes.md">x</a>`, []string{"notes.md: no such page"}},
		{"broken fragment on another page", "index.html", `<a href="a.html#nosuch">x</a>`, []string{`a.html#nosuch: no element with id "nosuch" in a.html`}},
		{"broken fragment on this page", "index.html", `<a href="#gone">x</a>`, []string{`#gone: no element with id "gone" on this page`}},
		{"directory without index.html", "index.html", `<a href="dir/">d</a>`, []string{"dir/: no such file"}},
		{"broken image", "index.html", `<img src="img/none.png">`, []string{"img/none.png: no such file"}},
		{"absolute path", "index.html", `<a href="/a.html">x</a>`, []string{"/a.html: absolute path"}},
		{"outside the site", "index.html", `<a href="../x.html">x</a>`, []string{"../x.html: points outside"}},
		{"duplicate id", "index.html", `<p id="d"></p><p id="d"></p>`, []string{"#d: id defined 2 times"}},
		{"links in comments and scripts are not links", "index.html", `<!-- <a href="nosuch.html"> --><script>var s = '<a href="nosuch.html">';</script>`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range site {
				files[k] = v
			}
			files[tt.page] = page(tt.body)
			var got []string
			for _, l := range CheckLinks(files) {
				if !assert.Equal(t, tt.page, l.Page, "unexpected broken link on %s: %s", l.Page, l) {
					continue
				}
				got = append(got, l.Href+": "+l.Reason)
			}
			require.Equal(t, len(tt.wantBroken), len(got), "CheckLinks = %q; want %d broken: %q", got, len(tt.wantBroken), tt.wantBroken)
			for i, w := range tt.wantBroken {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("broken[%d] = %q; want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

// TestBuildFailsOnBrokenLinks builds a book whose chapter links to a missing
// page and a missing fragment, and checks that both are reported with their
// page and that Build fails.
func TestBuildFailsOnBrokenLinks(t *testing.T) {
	cfg := writeBook(t, map[string]string{
		"SUMMARY.md": "# Summary\n\n- [One](one.md)\n- [Two](two.md)\n",
		"one.md":     "# One\n\nSee [two](two.md#nosuch), [three](three.md) and [here](#one).\n",
		"two.md":     "# Two\n\nBack to [one](one.md#one).\n",
	})
	_, err := Build(cfg)
	require.Error(t, err, "Build = nil error; want broken links")
	msg := err.Error()
	for _, want := range []string{
		`one.html: broken link "two.html#nosuch": no element with id "nosuch" in two.html`,
		`one.html: broken link "three.md": no such page; a link to a .md file must name a chapter listed in SUMMARY.md`,
		"2 broken internal links",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Build error lacks %q:\n%s", want, msg)
		}
	}
}

// TestCheckPrintIDs: every id a chapter's page carries must be on the print
// page that holds the chapter, under the chapter's prefix, since that is
// where a link into the chapter leads in print, whether or not a chapter has
// written such a link yet.
func TestCheckPrintIDs(t *testing.T) {
	page := func(body string) []byte {
		return []byte("<!DOCTYPE html><html><body>" + body + "</body></html>")
	}
	tests := []struct {
		name       string
		body       string // the chapter's own page: ch.html, print id "ch"
		printBody  string // the same chapter as print-2.html holds it
		wantBroken []string
	}{
		{"every id prefixed", `<h2 id="sec">S</h2><p id="term-x">T</p><sup id="fnref:1"></sup>`,
			`<h2 id="ch--sec">S</h2><p id="ch--term-x">T</p><sup id="ch--fnref:1"></sup>`, nil},
		{"an id left unprefixed", `<h2 id="sec">S</h2><h3 id="record-x">R</h3>`,
			`<h2 id="ch--sec">S</h2><h3 id="record-x">R</h3>`,
			[]string{`print-2.html #ch--record-x: no element with this id, though ch.html has "record-x"`}},
		{"an id dropped", `<h3 id="gone">G</h3>`, ``,
			[]string{`print-2.html #ch--gone: no element with this id, though ch.html has "gone"`}},
		{"a diagram's ids are its own, numbered per use", `<svg><marker id="dg1-arrow"></marker></svg>`,
			`<svg><marker id="dg7-arrow"></marker></svg>`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chapters := []*chapter{
				{Page: "first.html", PrintID: "first", Body: []byte(`<h2 id="a">A</h2>`)},
				{Page: "ch.html", PrintID: "ch", Body: []byte(tt.body)},
			}
			files := map[string][]byte{
				"first.html":   page(string(chapters[0].Body)),
				"ch.html":      page(tt.body),
				printPage:      page(`<section class="print-chapter" id="first"><h2 id="first--a">A</h2></section>`),
				"print-2.html": page(`<section class="print-chapter" id="ch">` + tt.printBody + `</section>`),
			}
			var got []string
			for _, l := range checkPrintIDs(chapters, files) {
				got = append(got, l.Page+" "+l.Href+": "+l.Reason)
			}
			require.Equal(t, len(tt.wantBroken), len(got), "checkPrintIDs = %q; want %d: %q", got, len(tt.wantBroken), tt.wantBroken)
			for i, w := range tt.wantBroken {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("broken[%d] = %q; want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

// TestReportedLinks: a broken link in a chapter is reported on the chapter's
// page, not again on index.html (a copy of the first chapter) or on the
// print page or volume that repeats it; a link broken only in print is
// reported wherever it is.
func TestReportedLinks(t *testing.T) {
	first := []byte("<p>first chapter</p>")
	tests := []struct {
		name   string
		index  []byte // index.html: a copy of first.html or not
		broken []string
		want   []string
	}{
		{"a chapter's link and its echoes", first,
			[]string{"first.html", "index.html", "print.html", "print-2.html", "second.html"},
			[]string{"first.html", "second.html"}},
		{"broken only in print, in two volumes", first,
			[]string{"print.html", "print-2.html"},
			[]string{"print.html", "print-2.html"}},
		{"index.html not a copy is a page of its own", []byte("<p>redirect</p>"),
			[]string{"first.html", "index.html"},
			[]string{"first.html", "index.html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{"first.html": first, "index.html": tt.index}
			var broken []BrokenLink
			for _, page := range tt.broken {
				broken = append(broken, BrokenLink{Page: page, Href: "x.html", Reason: "no such file in the site"})
			}
			var got []string
			for _, l := range reportedLinks(broken, files, "first.html") {
				got = append(got, l.Page)
			}
			assert.Equal(t, tt.want, got, "reportedLinks(%q) pages", tt.broken)
		})
	}
}
