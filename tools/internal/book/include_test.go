package book

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadSnippet(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		anchor    string
		wantCode  string
		wantLines [2]int
	}{
		{
			name:   "type declaration",
			file:   "stage0-mailbox/device/engine.go",
			anchor: "engine",
			wantCode: "// Engine polls its command slot.\n" +
				"type Engine struct {\n" +
				"\tdoorbell atomic.Uint64 // written by the host\n" +
				"\tdone     atomic.Uint64 // written by the engine\n" +
				"}\n",
			wantLines: [2]int{8, 12},
		},
		{
			name:      "nested region, dedented",
			file:      "stage0-mailbox/device/engine.go",
			anchor:    "body",
			wantCode:  "if seq := e.doorbell.Load(); seq != e.done.Load() {\n\te.execute(seq)\n}\n",
			wantLines: [2]int{26, 28},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn, err := readSnippet(fixtureRoot, tt.file, tt.anchor)
			require.NoError(t, err, "readSnippet(%s:%s)", tt.file, tt.anchor)
			assert.Equal(t, tt.wantCode, sn.Code, "readSnippet(%s:%s) code", tt.file, tt.anchor)
			assert.Equal(t, tt.wantLines, [2]int{sn.FirstLine, sn.LastLine}, "readSnippet(%s:%s) lines", tt.file, tt.anchor)
		})
	}
}

func TestIncludeDirective(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name    string
		src     string
		want    []string // substrings of the block's HTML
		wantNot []string
	}{
		{
			name: "anchor with caption naming file, lines and function",
			src:  "{{#include stage0-mailbox/device/engine.go:poll}}",
			want: []string{
				`<code class="path">stage0-mailbox/device/engine.go</code>`,
				`lines 17–31`,
				`<span class="decl">func (e *Engine) pollLoop</span>`,
				`class="chroma listing"`,
				`pollLoop`,
			},
			// The nested anchor's marker lines are dropped.
			wantNot: []string{"ANCHOR"},
		},
		{
			name: "type",
			src:  "{{#include stage0-mailbox/device/engine.go:engine}}",
			want: []string{`<span class="decl">type Engine</span>`, `lines 8–12`},
		},
		{
			name: "fragment inside a function",
			src:  "{{#include stage0-mailbox/device/engine.go:body}}",
			want: []string{`<span class="decl">in func (e *Engine) pollLoop</span>`},
		},
		{
			name:    "whole file drops every marker",
			src:     "{{#include stage0-mailbox/device/engine.go}}",
			want:    []string{`lines 1–37`, `type Engine, func (e *Engine) pollLoop, func (e *Engine) execute`},
			wantNot: []string{"ANCHOR"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, html := expandOK(t, b, tt.src)
			if !strings.Contains(md, "<!--softgpu-directive:0-->") {
				t.Errorf("expanded Markdown = %q; want a placeholder", md)
			}
			for _, w := range tt.want {
				if !strings.Contains(html, w) {
					t.Errorf("%s: HTML lacks %q:\n%s", tt.src, w, html)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(html, w) {
					t.Errorf("%s: HTML contains %q:\n%s", tt.src, w, html)
				}
			}
		})
	}
}

func TestIncludeErrors(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"missing anchor", "{{#include stage0-mailbox/device/engine.go:nosuch}}",
			`anchor "nosuch" not found in stage0-mailbox/device/engine.go (anchors there: body, engine, poll)`},
		{"missing file", "{{#include stage0-mailbox/device/nosuch.go:engine}}",
			"file stage0-mailbox/device/nosuch.go does not exist"},
		{"missing stage", "{{#include stage9-chardev/softgpu.go}}",
			"file stage9-chardev/softgpu.go does not exist"},
		{"outside the repository", "{{#include ../etc/passwd}}", "leaves the repository"},
		{"no file", "{{#include}}", "want {{#include STAGE/PATH:ANCHOR}}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Two lines before the directive: the error must name line 3.
			x := expand(t, b, "# Title\n\n"+tt.src+"\n")
			require.Equal(t, 1, len(x.Errs), "expand(%s): %d errors %v", tt.src, len(x.Errs), x.Errs)
			msg := x.Errs[0].Error()
			if !strings.HasPrefix(msg, "book/test.md:3: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("expand(%s) error = %q; want book/test.md:3: ... %s", tt.src, msg, tt.want)
			}
		})
	}
}

func TestDedent(t *testing.T) {
	got := dedent([]string{"\t\tif x {", "", "\t\t\ty()", "\t\t}"})
	want := []string{"if x {", "", "\ty()", "}"}
	assert.Equal(t, strings.Join(want, "|"), strings.Join(got, "|"), "dedent = %q; want %q", got, want)
}
