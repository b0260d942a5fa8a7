package book

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In the fixture record placed, stage 7's Gap/gap=30us ran with canaries
// of 330 and 331 ns in its first pass and 55 and 56 ns in its third.
func TestCanaryClaim(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name    string
		src     string
		want    string // in the rendered span's text or title; "" when the claim must fail
		wantErr string
	}{
		{
			name: "far, both canaries over the bound",
			src:  `{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op=">" value=300 stat=pass1}}`,
			want: `title="Checked when the book is built: the canaries of stage7-idle Gap/gap=30us in pass 1 read 330 ns and 331 ns (before, after), both &gt; 300 ns (record placed.json)"></span>`,
		},
		{
			name: "near, shown",
			src:  `{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op="<" value=200ns stat=pass3 show=a}}`,
			want: `>55.0 ns and 56.0 ns</span>`,
		},
		{
			name:    "a far pass said to be near",
			src:     `{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op="<" value=200 stat=pass1}}`,
			wantErr: "claim does not hold: the canaries of stage7-idle Gap/gap=30us in pass 1 of record placed read 330 ns and 331 ns (before, after), not both < 200 ns",
		},
		{
			// stage 4's Quiet: 110 and 112 ns in pass 1, so under 111 holds for one canary only
			name:    "one canary of two",
			src:     `{{#claim record=placed a=stage4-nolock:Quiet unit=canary-ns op="<" value=111 stat=pass1}}`,
			wantErr: "read 110 ns and 112 ns (before, after), not both < 111 ns",
		},
		{
			// placed's pass canaries: pass 4 read 55 and 56 ns; pass 2
			// 112 before it and 330 after
			name: "the pass canary, both ends",
			src:  `{{#claim record=placed a=pass unit=canary-ns op="<" value=100 stat=pass4 show=a}}`,
			want: `>55.0 ns and 56.0 ns</span>`,
		},
		{
			name: "the pass canary, one end",
			src:  `{{#claim record=placed a=pass unit=canary-ns op=">" value=300 stat=pass2 end=after show=a}}`,
			want: `>330 ns</span>`,
		},
		{"one end that does not hold", `{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op="<" value=200 stat=pass1 end=before}}`, "", "read 330 ns and 331 ns (before, after), not the one before < 200 ns"},
		{"an end that is not one", `{{#claim record=placed a=pass unit=canary-ns op="<" value=200 stat=pass1 end=middle}}`, "", "end=middle: want before, after or both"},
		{"end without canaries", `{{#claim record=placed a=stage7-idle:Quiet unit=cores op="<" value=1 end=before}}`, "", "end= picks a canary: it needs unit=canary-ns"},
		{"no such pass canary", `{{#claim record=placed a=pass unit=canary-ns op="<" value=200 stat=pass9}}`, "", "record placed has no pass canary for pass 9"},
		{"the median", `{{#claim record=placed a=stage7-idle:Quiet unit=canary-ns op="<" value=200}}`, "", "unit=canary-ns needs stat=passN"},
		{"two rows", `{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns op="<" value=200 stat=pass1}}`, "", "unit=canary-ns reads one row's canaries: drop b="},
		{"a ratio", `{{#claim record=placed a=stage7-idle:Quiet unit=canary-ns op="<" ratio=2 stat=pass1}}`, "", "compares the canaries with value=, not ratio="},
		{"no such pass", `{{#claim record=placed a=stage7-idle:Quiet unit=canary-ns op="<" value=200 stat=pass9}}`, "", "has no canary for pass 9"},
		{"no such row", `{{#claim record=placed a=stage7-idle:Nope unit=canary-ns op="<" value=200 stat=pass1}}`, "", `record placed has no benchmark "Nope" in stage7-idle`},
		{"a unit that does not fit", `{{#claim record=placed a=stage7-idle:Quiet unit=canary-ns op="<" value=2cores stat=pass1}}`, "", `unit "cores" does not fit`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := expand(t, b, "A row that ran "+tt.src+".\n")
			if tt.wantErr != "" {
				require.Len(t, x.Errs, 1, "expand(%s)", tt.src)
				assert.Contains(t, x.Errs[0].Error(), tt.wantErr)
				assert.True(t, strings.HasPrefix(x.Errs[0].Error(), "book/test.md:1: "), "error %q does not name the chapter and line", x.Errs[0])
				return
			}
			require.Empty(t, x.Errs, "expand(%s)", tt.src)
			html, _, err := b.md.render(x.Markdown, linkMode{chapterPath: "test.md", pagePath: "test.html"})
			require.NoError(t, err)
			assert.Contains(t, string(html), `class="figure claim"`)
			assert.Contains(t, string(html), tt.want)
		})
	}
}

// A record whose pass canaries were taken stage by stage needs a=pass:STAGE.
func TestPassCanaryPerStage(t *testing.T) {
	perStage := func(rec map[string]any) {
		rec["canary"] = []any{
			map[string]any{"pass": 1, "stage": "stage4-nolock", "before_ns": 110.0, "after_ns": 112.0},
			map[string]any{"pass": 1, "stage": "stage7-idle", "before_ns": 330.0, "after_ns": 340.0},
		}
	}
	_, err := Build(doctoredBook(t, `Far{{#claim record=placed a=pass:stage7-idle unit=canary-ns op=">" value=300 stat=pass1 show=none}}.`, perStage))
	require.NoError(t, err)
	_, err = Build(doctoredBook(t, `Far{{#claim record=placed a=pass:stage4-nolock unit=canary-ns op=">" value=300 stat=pass1 show=none}}.`, perStage))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the pass canaries of stage4-nolock in pass 1 of record placed read 110 ns and 112 ns (before, after), not both > 300 ns")
	_, err = Build(doctoredBook(t, `Far{{#claim record=placed a=pass unit=canary-ns op=">" value=300 stat=pass1 show=none}}.`, perStage))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "took its pass canaries stage by stage: write a=pass:STAGE")
}

// {{#ratio refused=say}} prints why the record gives no ratio, where a
// plain {{#ratio}} fails the build; a ratio the record does give it prints.
func TestRatioRefusedSay(t *testing.T) {
	const unplaced = `{{#ratio record=placed a=stage7-idle:Gap/gap=30us b=stage4-nolock:Gap/gap=30us unit=ns/op refused=say}}`
	const quiet = `{{#ratio record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores refused=say}}`
	b := newTestBuilder(t)
	for src, want := range map[string]string{
		unplaced: `class="figure refused" title="stage7-idle Gap/gap=30us = 31.1 µs (placed.json) ÷ stage4-nolock Gap/gap=30us`,
		quiet:    `>0.025×</span>`,
	} {
		md, _ := expandOK(t, b, src)
		html, _, err := b.md.render([]byte(md), linkMode{chapterPath: "test.md", pagePath: "test.html"})
		require.NoError(t, err)
		assert.Contains(t, string(html), want)
	}
	md, _ := expandOK(t, b, unplaced)
	assert.Contains(t, md, "no ratio&#58; no pass ran both rows in one placement")

	// Stage 4's Quiet doctored so that the passes in one placement (all
	// but the second) put stage 7 under stage 4 at the median, 2 ÷ 3, and
	// the medians put it over, 2 ÷ 0.5: the passes disagree.
	disagree := func(rec map[string]any) {
		m := rowMetric(t, rec, "stage7-idle", "Quiet")
		m["values"], m["best"], m["median"], m["min"], m["max"] = []any{2.0, 2.0, 2.0, 2.0, 2.0}, 2.0, 2.0, 2.0, 2.0
		m = rowMetric(t, rec, "stage4-nolock", "Quiet")
		m["values"], m["best"], m["median"], m["min"], m["max"] = []any{3.0, 0.5, 3.0, 0.5, 0.5}, 0.5, 0.5, 0.5, 3.0
	}
	_, err := Build(doctoredBook(t, "Quiet: "+quiet+".", disagree))
	require.NoError(t, err)
	_, err = Build(doctoredBook(t, "Quiet: "+strings.Replace(quiet, " refused=say", "", 1)+".", disagree))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the passes disagree about this comparison")
	cfg := doctoredBook(t, "Quiet: "+quiet+".", disagree)
	_, err = Build(cfg)
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(cfg.OutDir, "one.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "no ratio: the passes disagree")

	x := expand(t, b, `{{#ratio record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores refused=maybe}}`)
	require.Len(t, x.Errs, 1)
	assert.Contains(t, x.Errs[0].Error(), "refused=maybe: want say or fail")
}

func TestPlacedClaim(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct{ src, wantErr string }{
		// placed: stage 7's and stage 4's Quiet read 111/112 and 110/112 ns in pass 1, and 112/110 and 330/335 in pass 2
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=same stat=pass1}}`, ""},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=apart stat=pass2}}`, ""},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=same stat=pass2}}`,
			"claim does not hold: in pass 2 of record placed the two rows did not run in one placement (stage7-idle Quiet's canaries 112 ns and 110 ns, stage4-nolock Quiet's 330 ns and 335 ns: highest over lowest 3.05 against the tolerance 1.3)"},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=apart stat=pass1}}`, "the two rows ran in one placement"},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=same}}`, "placed= needs stat=passN"},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=near stat=pass1}}`, "placed=near: want same or apart"},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores placed=same stat=pass1}}`, "placed= compares two rows' canaries: it needs unit=canary-ns"},
		{`{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=canary-ns placed=same op="<" value=1 stat=pass1}}`, "placed= takes no op="},
	}
	for _, tt := range tests {
		x := expand(t, b, "Paired "+tt.src+".\n")
		if tt.wantErr == "" {
			assert.Empty(t, x.Errs, tt.src)
			continue
		}
		if assert.Len(t, x.Errs, 1, tt.src) {
			assert.Contains(t, x.Errs[0].Error(), tt.wantErr)
		}
	}
}

func TestPassList(t *testing.T) {
	for stat, want := range map[string][]int{"pass1,3": {1, 3}, "pass1-3,5": {1, 2, 3, 5}, "pass2-2": {2}} {
		got, isList, err := passList(stat)
		require.NoError(t, err, stat)
		assert.True(t, isList, stat)
		assert.Equal(t, want, got, stat)
	}
	for _, stat := range []string{"median", "best", "pass3"} {
		_, isList, _ := passList(stat)
		assert.False(t, isList, stat)
	}
	for stat, want := range map[string]string{"pass3-1": "want a list of passes", "pass0,1": "want a list of passes", "pass1,x": "want a list of passes", "pass1,1": "pass 1 twice", "pass1-3,2": "pass 2 twice"} {
		_, isList, err := passList(stat)
		assert.True(t, isList, stat)
		if assert.Error(t, err, stat) {
			assert.Contains(t, err.Error(), want, stat)
		}
	}
}

// A claim over a list of passes holds only if it holds in each.
func TestClaimOverPasses(t *testing.T) {
	b := newTestBuilder(t)
	// stage 7's Gap/gap=30us ran far (330/331, 330/331, 330/330 ns) in passes 1, 2 and 5, near in 3 and 4
	x := expand(t, b, `Far{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op=">" value=300 stat=pass1-2,5 show=none}}.`+"\n")
	require.Empty(t, x.Errs)
	assert.Contains(t, string(x.Markdown), "Checked when the book is built, pass by pass: pass 1: the canaries of stage7-idle Gap/gap=30us in pass 1 read 330 ns and 331 ns")
	x = expand(t, b, `Far{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=canary-ns op=">" value=300 stat=pass1-3}}.`+"\n")
	if assert.Len(t, x.Errs, 1) {
		assert.Contains(t, x.Errs[0].Error(), "claim does not hold: the canaries of stage7-idle Gap/gap=30us in pass 3 of record placed read 55.0 ns and 56.0 ns")
	}
	// a value claim over passes: stage 7's Gap/gap=3us took 1.05 µs or so in every pass
	x = expand(t, b, `Under{{#claim record=placed a=stage7-idle:Gap/gap=3us unit=ns/op op="<" value=2us stat=pass1-5}}.`+"\n")
	assert.Empty(t, x.Errs)
	x = expand(t, b, `{{#claim record=placed a=stage7-idle:Gap/gap=3us unit=ns/op op="<" value=2us stat=pass1,2 show=a}}`+"\n")
	if assert.Len(t, x.Errs, 1) {
		assert.Contains(t, x.Errs[0].Error(), "a claim over several passes shows no one figure: write show=none")
	}
}
