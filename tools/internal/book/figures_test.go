package book

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/records"
)

// pairedRecord is a record of two stage7-idle rows, A and B, five passes
// each with steady canaries, so that {{#ratio}} takes them pass by pass.
func pairedRecord(t *testing.T, name string, a, b []float64) string {
	t.Helper()
	row := func(bench string, values []float64) records.Row {
		r := records.Row{Stage: "stage7-idle", Benchmark: bench, Metrics: []records.Metric{records.NewMetric("ns/op", values)}}
		for i := range values {
			r.Canary = append(r.Canary, records.RowCanary{Pass: i + 1, Before: 100, After: 101})
		}
		return r
	}
	rec := &records.Record{Schema: records.SchemaVersion, Name: name, Date: "2026-12-01T00:00:00Z",
		Settings: records.Settings{Passes: len(a)}, Rows: []records.Row{row("A", a), row("B", b)}}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	return string(data)
}

// renderFigures builds a one-chapter book with the given records and
// returns the chapter's HTML or the build's error.
func renderFigures(t *testing.T, chapter string, recs map[string]string) (string, error) {
	t.Helper()
	files := map[string]string{"SUMMARY.md": "# Summary\n\n- [Chapter](ch.md)\n", "ch.md": "# Chapter\n\n" + chapter + "\n"}
	for name, data := range recs {
		files["records/"+name+".json"] = data
	}
	site, err := Render(writeBook(t, files))
	if err != nil {
		return "", err
	}
	return string(site.Files["ch.html"]), nil
}

// TestRatioAgainstMedians: a ratio the prose states must agree with the
// quotient of the medians shown with it (same side of 1, within 10 %),
// and is printed with its range when its passes span more than 2×.
func TestRatioAgainstMedians(t *testing.T) {
	tests := []struct {
		name    string
		a, b    []float64
		want    string // in the page
		wantErr string
	}{
		{"agree", []float64{200, 210, 190, 205, 195}, []float64{100, 100, 100, 100, 100}, ">2.0×</span>", ""},
		// Per-pass ratios 0.17, 0.42, 1.3, 1.27, 4: their median 1.27× against
		// medians 100 ÷ 110 = 0.91×, the case of "What idle costs".
		{"other side of 1", []float64{20, 50, 130, 140, 100}, []float64{120, 120, 100, 110, 25}, "",
			"the ratio stated, 1.3× (median of the per-pass ratios, which span 0.17× to 4.0×), and the quotient of the medians shown, 100 ns ÷ 110 ns = 0.91×, fall on different sides of 1"},
		{"more than 10 % off", []float64{200, 300, 400, 100, 100}, []float64{100, 100, 100, 10, 10}, "",
			"differ by more than 10 %"},
		{"wide but agreeing, printed with its range", []float64{100, 300, 200, 200, 200}, []float64{100, 100, 100, 100, 100}, ">2.0× (passes 1.0–3.0×)</span>", ""},
		{"a tie as printed is no contradiction", []float64{99, 99, 99, 101, 101}, []float64{100, 100, 100, 100, 99}, ">0.99×</span>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := renderFigures(t, "It took {{#ratio record=r a=stage7-idle:A b=stage7-idle:B unit=ns/op}}.", map[string]string{"r": pairedRecord(t, "r", tt.a, tt.b)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Render = %v; want an error containing %q", err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			if !strings.Contains(page, tt.want) {
				t.Errorf("page lacks %q:\n%s", tt.want, page)
			}
		})
	}
}

// TestWideSpreadPrintsRange: a table cell whose passes spread past 100 %
// of the median shows min–max, not ± a percentage.
func TestWideSpreadPrintsRange(t *testing.T) {
	page, err := renderFigures(t, "{{#table record=r stage=stage7-idle bench=A|B unit=ns/op}}",
		map[string]string{"r": pairedRecord(t, "r", []float64{100, 110, 105, 3000, 100}, []float64{100, 110, 105, 100, 100})})
	require.NoError(t, err)
	for _, want := range []string{`<span class="pm">100 ns–3.00 µs</span>`, `<span class="pm">±5.0%</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Contains(page, "±1414%") || strings.Contains(page, "±1381%") {
		t.Errorf("table prints a spread past 100 %% as ± percent")
	}
}

// TestOneFigurePerQuantity: one row and metric shown on one page from two
// records with two values fails the build; the same value twice does not.
func TestOneFigurePerQuantity(t *testing.T) {
	recs := map[string]string{
		"old": pairedRecord(t, "old", []float64{610, 610, 610}, []float64{1, 1, 1}),
		"new": pairedRecord(t, "new", []float64{452, 452, 452}, []float64{1, 1, 1}),
	}
	_, err := renderFigures(t, "{{#table record=old stage=stage7-idle bench=A unit=ns/op}}\n\nIt took {{#value record=new stage=stage7-idle bench=A unit=ns/op}}.", recs)
	if err == nil || !strings.Contains(err.Error(), "one figure per quantity per page: stage7-idle A (ns/op, median, new) is shown here as 452 ns from new.json, and at line 3 as 610 ns from old.json; show one") {
		t.Errorf("Render = %v; want the second figure refused", err)
	}
	if _, err := renderFigures(t, "{{#table record=new stage=stage7-idle bench=A unit=ns/op}}\n\nIt took {{#value record=new stage=stage7-idle bench=A unit=ns/op}}.", recs); err != nil {
		t.Errorf("the same figure twice: %v", err)
	}
}

// TestUnpairedWakeComparison: a ratio of two rows of wake-state families,
// measured one after the other, is marked unpaired and the page says the
// book draws no conclusion from it; a ratio with one side outside them is not.
func TestUnpairedWakeComparison(t *testing.T) {
	rec := pairedRecord(t, "r", []float64{200, 200, 200}, []float64{100, 100, 100})
	rec = strings.ReplaceAll(strings.ReplaceAll(rec, `"benchmark":"A"`, `"benchmark":"IdleGap/idle=sleep"`), `"benchmark":"B"`, `"benchmark":"IdleGap/idle=spin"`)
	page, err := renderFigures(t, "It took {{#ratio record=r a=stage7-idle:IdleGap/idle=sleep b=stage7-idle:IdleGap/idle=spin unit=ns/op}}.", map[string]string{"r": rec})
	require.NoError(t, err)
	for _, want := range []string{"2.0× (unpaired)</span>", `class="figure unpaired"`, `<p class="unpaired-note">1 comparison on this page is marked <em>(unpaired)</em>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	plain := pairedRecord(t, "p", []float64{200, 200, 200}, []float64{100, 100, 100})
	plain = strings.ReplaceAll(plain, `"benchmark":"A"`, `"benchmark":"Gap/gap=3ms"`)
	page, err = renderFigures(t, "It took {{#ratio record=p a=stage7-idle:Gap/gap=3ms b=stage7-idle:B unit=ns/op}}.", map[string]string{"p": plain})
	require.NoError(t, err)
	if strings.Contains(page, "unpaired") {
		t.Errorf("a ratio with one side outside the wake-state families is marked unpaired")
	}
}

// TestSteadyShare: the share leaves the wake-state families out and counts
// a row steady when its spread is within the threshold.
func TestSteadyShare(t *testing.T) {
	row := func(bench string, values ...float64) records.Row {
		return records.Row{Stage: "s", Benchmark: bench, Metrics: []records.Metric{records.NewMetric("ns/op", values)}}
	}
	rec := &records.Record{Rows: []records.Row{
		row("Fill/a", 100, 105, 110), // 10 %: steady
		row("Fill/b", 100, 150, 200), // 100 %: noisy
		row("IdleGap/x", 100, 900, 50),
		row("Gap/gap=3ms", 100, 100, 100),
	}}
	if steady, counted, wake := steadyShare(rec, 0.15); steady != 1 || counted != 2 || wake != 2 {
		t.Errorf("steadyShare = %d, %d, %d; want 1 steady of 2 counted, 2 wake-state rows left out", steady, counted, wake)
	}
}

// TestFloorShare: against the machine's floor, a row is held to the spread
// of the bare ping-pong its own stage's binary measured in the same record;
// a stage without that row has no floor, and its rows are not counted.
func TestFloorShare(t *testing.T) {
	row := func(stage, bench string, values ...float64) records.Row {
		return records.Row{Stage: stage, Benchmark: bench, Metrics: []records.Metric{records.NewMetric("ns/op", values)}}
	}
	rec := &records.Record{
		Rows: []records.Row{
			row("s0", "Fill/a", 100, 120, 140), // 40 %: within s0's 50 %
			row("s0", "Fill/b", 100, 150, 200), // 100 %: wider than s0's floor
			row("s0", "IdleGap/x", 100, 900, 50),
			row("s1", "Fill/a", 100, 101, 102), // s1 measured no ping-pong: not counted
		},
		Limits: []records.Row{row("s0", "Baseline/pingpong", 80, 100, 130)},
	}
	if within, counted := floorShare(rec); within != 1 || counted != 2 {
		t.Errorf("floorShare = %d of %d; want 1 of 2 (s0's two rows outside the wake-state families, the ping-pong itself not counted)", within, counted)
	}
}

// TestAppendixSteadyShare: the records appendix gives each record's share
// of steady rows outside the wake-state families, and the edition's share
// against the 90 % target.
func TestAppendixSteadyShare(t *testing.T) {
	rec := pairedRecord(t, "r", []float64{100, 105, 110}, []float64{100, 200, 300})
	page, err := renderFigures(t, "{{#records-appendix}}", map[string]string{"r": rec})
	require.NoError(t, err)
	for _, want := range []string{
		"steady rows</dt><dd>50% (1 of 2 rows outside the wake-state families) within 15%",
		"Over the 1 measured record of this edition, 50% of the rows outside the wake-state families (1 of 2) spread by at most 15% over their passes, which falls short of the 90% the project holds to",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("appendix lacks %q", want)
		}
	}
}

// TestAppendixTranscription: a record marked transcribed, of this machine
// and not the reference machine, is shown by its source, not its passes,
// is left out of the edition's share, and its tables say where their
// figures were copied from.
func TestAppendixTranscription(t *testing.T) {
	measured := pairedRecord(t, "r", []float64{100, 105, 110}, []float64{100, 200, 300})
	notes := &records.Record{Schema: records.SchemaVersion, Name: "notes", Transcribed: true,
		Machine: records.Machine{Label: "this machine", Cores: 2},
		Command: "none: copied by hand", Source: "the machine notes",
		Rows: []records.Row{{Stage: "probes", Benchmark: "Spin/yield=none", Metrics: []records.Metric{records.NewMetric("ns/op", []float64{2e7})}}}}
	data, err := json.Marshal(notes)
	require.NoError(t, err)
	page, err := renderFigures(t, "{{#records-appendix}}\n\n{{#table record=notes stage=probes unit=ns/op}}",
		map[string]string{"r": measured, "notes": string(data)})
	require.NoError(t, err)
	entry, _, _ := strings.Cut(page[strings.Index(page, `<h3 id="record-notes">`):], "</section>")
	for _, want := range []string{
		"Over the 1 measured record of this edition",
		`<p class="reproduce">Transcribed from the machine notes.</p>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(entry, "<dt>source</dt><dd>the machine notes</dd>") || strings.Contains(entry, "passes kept") {
		t.Errorf("appendix entry of a transcription = %q; want its source and no passes", entry)
	}
}
