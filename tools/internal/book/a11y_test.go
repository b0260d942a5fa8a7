package book

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSpreadUnderATenthIsEscaped: a spread under 0.1 % is written "<0.1%",
// and a bare "<" before a digit is a parse error in HTML (the Nu checker
// found 32 of them in the book).
func TestSpreadUnderATenthIsEscaped(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "book", "records", "test.json"))
	require.NoError(t, err)
	tight := strings.Replace(string(data), `"best": 115.0,
          "median": 119.6,
          "values": [
            115.0,
            119.6,
            125.35
          ]`, `"best": 119.6,
          "median": 119.6,
          "values": [
            119.6,
            119.6,
            119.6001
          ]`, 1)
	if tight == string(data) {
		t.Fatal("the fixture record changed: Baseline/pingpong's values not found")
	}
	b := newTestBuilder(t)
	b.records.dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(b.records.dir, "test.json"), []byte(tight), 0o644))
	_, html := expandOK(t, b, "{{#table record=test stage=limits bench=Baseline/pingpong unit=ns/op}}\n")
	if m := regexp.MustCompile(`<[0-9]`).FindString(html); m != "" {
		t.Errorf("the table has an unescaped %q:\n%s", m, html)
	}
	if !strings.Contains(html, `<span class="pm">±&lt;0.1%</span>`) {
		t.Errorf("the table lacks ±&lt;0.1%%:\n%s", html)
	}
}

// TestChartHasADataTable: a screen reader cannot read a chart's drawing, so
// every chart carries its figures as a table in the same figure.
func TestChartHasADataTable(t *testing.T) {
	b := newTestBuilder(t)
	_, html := expandOK(t, b, "{{#chart record=test stage=stage0-mailbox,stage1-ring bench=RoundTrip/.* unit=ns/op}}\n")
	for _, want := range []string{
		`<details class="chart-data"><summary>The chart's figures as a table</summary>`,
		`<table>`, `<th scope="col">stage0-mailbox</th>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("chart lacks %q:\n%s", want, html)
		}
	}
	if strings.Index(html, "<table>") > strings.Index(html, "<figcaption") && strings.Contains(html, "<figcaption") {
		t.Errorf("the table follows the caption; a caption is a figure's last child")
	}
}

// TestDiagramIsANamedImage: an inlined diagram is one image to a screen
// reader, named by its <title>; one without a title says nothing, so it
// does not build.
func TestDiagramIsANamedImage(t *testing.T) {
	s, err := inlineSVG([]byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><title>A ring of eight slots</title><rect/></svg>`), "dg1-")
	require.NoError(t, err)
	if !strings.HasPrefix(s, `<svg class="diagram" role="img" xmlns=`) {
		t.Errorf("inlined diagram = %.80s; want role=\"img\" on its root", s)
	}
	if _, err := inlineSVG([]byte(`<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>`), "dg2-"); err == nil || !strings.Contains(err.Error(), "<title>") {
		t.Errorf("a diagram without a <title>: err = %v; want one asking for a <title>", err)
	}
}

func TestDiagramMinWidth(t *testing.T) {
	tests := []struct {
		svg  string
		want int
	}{
		{`<svg viewBox="0 0 360 446"><g font-size="11"><text font-size="10">x</text></g></svg>`, 360},
		{`<svg viewBox="0 0 480 736"><g font-size="12"><text font-size="11">x</text></g></svg>`, 437}, // 436.4, rounded up
		{`<svg viewBox="0 0 480 736"><text>no size</text></svg>`, 0},
		{`<svg width="10"><text font-size="11">no viewBox</text></svg>`, 0},
	}
	for _, tt := range tests {
		if got := diagramMinWidth([]byte(tt.svg)); got != tt.want {
			t.Errorf("diagramMinWidth(%s) = %d; want %d", tt.svg, got, tt.want)
		}
	}
}
