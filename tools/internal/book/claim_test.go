package book

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClaim(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name    string
		src     string
		want    string // in the rendered span; "" when the claim must fail
		wantErr string
	}{
		{
			name: "ratio that holds, from the passes in one placement",
			src:  `{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op="<" ratio=0.1}}`,
			want: `>0.025×</span>`,
		},
		{
			name: "ratio with a word for the operator, showing a",
			src:  `{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op=lt ratio=0.1 show=a}}`,
			want: `>0.05 cores</span>`,
		},
		{
			name: "value against a constant with its own unit",
			src:  `{{#claim record=placed a=stage7-idle:Gap/gap=30us unit=ns/op op=">=" value=30us}}`,
			want: `>31.1 µs</span>`,
		},
		{
			name: "value against a bare number in the metric's unit",
			src:  `{{#claim record=placed a=stage7-idle:Quiet unit=cores op="<=" value=0.05}}`,
			want: `>0.05 cores</span>`,
		},
		{
			name:    "ratio that the record contradicts",
			src:     `{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op=">" ratio=0.5}}`,
			wantErr: "claim does not hold: stage7-idle Quiet = 0.05 cores ÷ stage4-nolock Quiet = 2.00 cores gives 0.025× (median of the per-pass ratios over the 4 of 5 passes",
		},
		{
			name:    "value that the record contradicts",
			src:     `{{#claim record=placed a=stage7-idle:Gap/gap=3us unit=ns/op op="<" value=1us}}`,
			wantErr: "claim does not hold: stage7-idle Gap/gap=3us gives 1.05 µs (median of 5 passes), which is not < 1.00 µs",
		},
		{
			name:    "no pass ran both rows in one placement",
			src:     `{{#claim record=placed a=stage7-idle:Gap/gap=30us b=stage4-nolock:Gap/gap=30us unit=ns/op op="<" ratio=2}}`,
			wantErr: "no pass ran both rows in one placement (all four canaries within 30% of one another): pass 1: 330.0, 331.0 against 110.0, 110.0 ns",
		},
		{"ratio and value", `{{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op="<" ratio=0.1 value=1}}`, "", "want ratio= (a/b against it) or value= (a against it)"},
		{"ratio without b", `{{#claim record=placed a=stage7-idle:Quiet unit=cores op="<" ratio=0.1}}`, "", "ratio= compares a/b: missing b="},
		{"unknown operator", `{{#claim record=placed a=stage7-idle:Quiet unit=cores op=== value=1}}`, "", "op===: want <, <=, >, >="},
		{"a unit that does not fit", `{{#claim record=placed a=stage7-idle:Quiet unit=cores op="<" value=3us}}`, "", `unit "us" does not fit the metric's cores`},
		{"unknown row", `{{#claim record=placed a=stage7-idle:Nope unit=cores op="<" value=1}}`, "", `record placed has no benchmark "Nope" in stage7-idle`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := expand(t, b, "A claim: "+tt.src+".\n")
			if tt.wantErr != "" {
				if len(x.Errs) != 1 || !strings.Contains(x.Errs[0].Error(), tt.wantErr) {
					t.Fatalf("expand(%s) errors = %v; want one containing %q", tt.src, x.Errs, tt.wantErr)
				}
				if !strings.HasPrefix(x.Errs[0].Error(), "book/test.md:1: ") {
					t.Errorf("error %q does not name the chapter and line", x.Errs[0])
				}
				return
			}
			for _, err := range x.Errs {
				t.Fatalf("expand(%s): %v", tt.src, err)
			}
			html, _, err := b.md.render(x.Markdown, linkMode{chapterPath: "test.md", pagePath: "test.html"})
			require.NoError(t, err)
			if !strings.Contains(string(html), tt.want) || !strings.Contains(string(html), `class="figure claim"`) {
				t.Errorf("%s rendered to\n%s\nwant a claim span containing %q", tt.src, html, tt.want)
			}
		})
	}
}

// doctoredBook writes a book of one chapter over a copy of the fixture's
// record placed, changed by doctor.
func doctoredBook(t *testing.T, chapter string, doctor func(rec map[string]any)) Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "book", "records", "placed.json"))
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(data, &rec))
	doctor(rec)
	doctored, err := json.MarshalIndent(rec, "", "  ")
	require.NoError(t, err)
	return writeBook(t, map[string]string{
		"SUMMARY.md":          "# Summary\n\n- [One](one.md)\n",
		"one.md":              "# One\n\n" + chapter + "\n",
		"records/placed.json": string(doctored),
	})
}

// rowMetric returns the first metric of row bench of stage in a decoded record.
func rowMetric(t *testing.T, rec map[string]any, stage, bench string) map[string]any {
	t.Helper()
	for _, r := range rec["rows"].([]any) {
		row := r.(map[string]any)
		if row["stage"] == stage && row["benchmark"] == bench {
			return row["metrics"].([]any)[0].(map[string]any)
		}
	}
	t.Fatalf("no row %s %s", stage, bench)
	return nil
}

// TestClaimFailsTheBuild re-records, in effect, the fixture with stage 7's
// quiet device as costly as stage 4's: the chapter's claim is now false,
// and the build must say so rather than print it.
func TestClaimFailsTheBuild(t *testing.T) {
	const chapter = `A quiet stage 7 device costs {{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op="<" ratio=0.1}} of stage 4's.`
	if _, err := Build(doctoredBook(t, chapter, func(map[string]any) {})); err != nil {
		t.Fatalf("Build with the record as made: %v", err)
	}
	cfg := doctoredBook(t, chapter, func(rec map[string]any) {
		m := rowMetric(t, rec, "stage7-idle", "Quiet")
		values := []any{1.9, 1.95, 2.0, 1.97, 1.96}
		m["values"], m["best"], m["median"], m["min"], m["max"] = values, 1.9, 1.96, 1.9, 2.0
	})
	_, err := Build(cfg)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("Build with a doctored record = %v; want a *BuildError", err)
	}
	if want := "one.md:3: {{#claim record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores op=\"<\" ratio=0.1}}: claim does not hold"; !strings.Contains(err.Error(), want) {
		t.Errorf("Build error = %v; want %q", err, want)
	}
	_, err = os.Stat(filepath.Join(cfg.OutDir, "index.html"))
	assert.Error(t, err, "a build with a false claim wrote the site")
}

// TestImpossibleRecord: a value no run could produce fails the build,
// naming the record, the row and the metric.
func TestImpossibleRecord(t *testing.T) {
	const chapter = `Quiet: {{#value record=placed stage=stage7-idle bench=Quiet unit=cores}}.`
	tests := []struct {
		name   string
		doctor func(rec map[string]any)
		want   string
	}{
		{"a negative time", func(rec map[string]any) {
			m := rowMetric(t, rec, "stage7-idle", "Gap/gap=3us")
			m["values"].([]any)[1] = -1500.0
			m["min"] = -1500.0
		}, "stage7-idle Gap/gap=3us: ns/op: value 2 is -1500: a measurement cannot be negative"},
		{"a rate of zero", func(rec map[string]any) {
			rows := rec["rows"].([]any)
			rows = append(rows, map[string]any{"stage": "stage7-idle", "benchmark": "H2D/size=1MiB", "metrics": []any{
				map[string]any{"unit": "B/s", "best": 0.0, "median": 0.0, "min": 0.0, "max": 0.0, "values": []any{0.0}},
			}})
			rec["rows"] = rows
		}, "stage7-idle H2D/size=1MiB: B/s: value 1 is 0: a rate must be positive"},
		{"a median outside the values", func(rec map[string]any) {
			rowMetric(t, rec, "stage7-idle", "Quiet")["median"] = 5.0
		}, "stage7-idle Quiet: cores: median 5 is outside [min 0.04, max 0.3]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(doctoredBook(t, chapter, tt.doctor))
			if err == nil || !strings.Contains(err.Error(), "record placed.json cannot be used") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build = %v; want a refusal containing %q", err, tt.want)
			}
		})
	}
}
