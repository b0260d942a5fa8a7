package book

import (
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// parseSVG checks that the chart in html is well-formed XML and returns its
// text content and the element names seen.
func parseSVG(t *testing.T, html string) (text string, elements map[string]int) {
	t.Helper()
	svg := svgRE.FindString(html)
	if svg == "" {
		t.Fatalf("no <svg> in:\n%s", html)
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	elements = map[string]int{}
	var b strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "chart is not well-formed XML\n%s", svg)
		switch tok := tok.(type) {
		case xml.StartElement:
			elements[tok.Name.Local]++
			assert.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space, "element %s in namespace %q; want the SVG namespace", tok.Name.Local, tok.Name.Space)
		case xml.CharData:
			b.Write(tok)
			b.WriteByte('\n')
		}
	}
	return b.String(), elements
}

func TestChart(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name     string
		src      string
		wantLog  bool
		wantText []string // in the SVG's text (labels, title, desc)
		wantElem string   // an element the chart must draw
	}{
		{
			name:     "decades of data: log scale",
			src:      `{{#chart record=test stage=stage1-ring bench=FillStream/.* unit=ns/op x=depth title="Fill <by> depth & more"}}`,
			wantLog:  true,
			wantText: []string{"Fill <by> depth & more", "10 ns", "1 µs", "256", "depth", "(log scale)"},
			wantElem: "polyline",
		},
		{
			name:     "narrow range: linear, one series per stage",
			src:      "{{#chart record=test stage=stage0-mailbox,stage1-ring bench=Gap/.* unit=ns/op}}",
			wantLog:  false,
			wantText: []string{"3ms", "30µs", "stage0-mailbox", "stage1-ring", "gap"},
			wantElem: "polyline",
		},
		{
			name:     "stages on x as bars, with the reference VM",
			src:      "{{#chart record=test stage=stage0-mailbox,stage1-ring bench=H2D/.* unit=B/s ref=reference}}",
			wantLog:  false, // 9.2 to 65.6 GB/s: under a decade
			wantText: []string{"this machine", "reference VM", "GB/s", "stage1-ring"},
			wantElem: "rect",
		},
		{
			name:     "forced linear",
			src:      "{{#chart record=test stage=stage1-ring bench=FillStream/.* unit=ns/op log=off}}",
			wantLog:  false,
			wantText: []string{"depth"},
			wantElem: "circle",
		},
		{
			name:     "forced log",
			src:      "{{#chart record=test stage=stage0-mailbox bench=Gap/.* unit=ns/op log=on}}",
			wantLog:  true,
			wantText: []string{"(log scale)"},
			wantElem: "circle",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, html := expandOK(t, b, tt.src)
			text, elements := parseSVG(t, html)
			if elements["title"] == 0 || elements["desc"] == 0 {
				t.Errorf("chart has %d <title> and %d <desc>; want both", elements["title"], elements["desc"])
			}
			if elements[tt.wantElem] == 0 {
				t.Errorf("chart draws no <%s>", tt.wantElem)
			}
			assert.Equal(t, tt.wantLog, strings.Contains(text, "(log scale)"), "log scale")
			for _, w := range tt.wantText {
				if !strings.Contains(text, w) {
					t.Errorf("chart text lacks %q:\n%s", w, text)
				}
			}
			if !strings.Contains(html, `<p class="source">Source: record <a href="records/test.json">test.json</a> (this machine, 2026-11-30, commit 0123456789ab+dirty)`) {
				t.Errorf("chart has no source line:\n%s", html)
			}
		})
	}
}

func TestChooseLog(t *testing.T) {
	tests := []struct {
		name     string
		min, max float64
		mode     string
		want     bool
		wantErr  bool
	}{
		{"one decade", 100, 1000, "auto", false, false},
		{"1.4 decades", 100, 2500, "auto", false, false},
		{"1.6 decades", 100, 4000, "auto", true, false},
		{"three decades", 10, 10000, "auto", true, false},
		{"a zero never goes log by itself", 0, 10000, "auto", false, false},
		{"forced on", 100, 200, "on", true, false},
		{"forced off", 10, 10000, "off", false, false},
		{"on with a zero", 0, 10, "on", false, true},
		{"bad mode", 1, 10, "maybe", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseLog(tt.min, tt.max, tt.mode)
			require.Equal(t, tt.wantErr, (err != nil), "chooseLog(%g, %g, %s) error = %v %v", tt.min, tt.max, tt.mode, err, tt.wantErr)
			assert.Equal(t, tt.want, got, "chooseLog(%g, %g, %s)", tt.min, tt.max, tt.mode)
		})
	}
}

func TestShortNames(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"shared family and size dropped",
			[]string{"Managed/idle=spin/prefetch=16/size=1MiB", "Managed/prefetch=0/size=1MiB", "Managed/prefetch=16/size=1MiB"},
			[]string{"idle=spin/prefetch=16", "prefetch=0", "prefetch=16"}},
		{"different families kept", []string{"H2D/size=1MiB", "D2H/size=1MiB"}, []string{"H2D", "D2H"}},
		{"one name is left whole", []string{"Quiet"}, []string{"Quiet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shortNames(tt.in)
			assert.Equal(t, strings.Join(tt.want, " "), strings.Join(got, " "), "shortNames(%q) = %q; want %q", tt.in, got, tt.want)
		})
	}
}
