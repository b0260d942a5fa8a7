package record

import (
	"reflect"
	"strings"
	"testing"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/records"
)

func output(t *testing.T, text string) *benchfmt.Output {
	t.Helper()
	out, err := benchfmt.ParseString(text)
	if err != nil {
		t.Fatalf("ParseString(%q): %v", text, err)
	}
	return out
}

func TestSummarise(t *testing.T) {
	passes := []Pass{
		{Attempt: 1, Runs: []StageRun{
			{Stage: "stage0-mailbox", Output: output(t, "pkg: softgpu/stage0-mailbox\n"+
				"BenchmarkBaseline/pingpong-2 100 120 ns/op\n"+
				"BenchmarkH2D/size=1MiB-2 10 50000 ns/op 20000 MB/s 2.0 cores\n")},
			{Stage: "stage1-ring", Output: output(t, "pkg: softgpu/stage1-ring\n"+
				"BenchmarkH2D/size=1MiB-2 10 40000 ns/op 25000 MB/s 1.9 cores\n")},
		}},
		{Attempt: 3, Runs: []StageRun{
			{Stage: "stage1-ring", Output: output(t, "pkg: softgpu/stage1-ring\n"+
				"BenchmarkH2D/size=1MiB-2 10 30000 ns/op 30000 MB/s 2.1 cores\n")},
			{Stage: "stage0-mailbox", Output: output(t, "pkg: softgpu/stage0-mailbox\n"+
				"BenchmarkBaseline/pingpong-2 100 110 ns/op\n"+
				// Reported twice in one pass: the pass contributes the median
				// (the lower middle of the two).
				"BenchmarkH2D/size=1MiB-2 10 60000 ns/op 18000 MB/s 2.0 cores\n"+
				"BenchmarkH2D/size=1MiB-2 10 70000 ns/op 16000 MB/s 2.2 cores\n")},
		}},
	}
	rows, limits := Summarise(passes, []string{"stage0-mailbox", "stage1-ring"})

	wantRows := []records.Row{
		{Stage: "stage0-mailbox", Benchmark: "H2D/size=1MiB", Metrics: []records.Metric{
			{Unit: "ns/op", Best: 50000, Median: 50000, Min: 50000, Max: 60000, Values: []float64{50000, 60000}},
			{Unit: "B/s", Best: 20000e6, Median: 16000e6, Min: 16000e6, Max: 20000e6, Values: []float64{20000e6, 16000e6}},
			{Unit: "cores", Best: 2.0, Median: 2.0, Min: 2.0, Max: 2.0, Values: []float64{2.0, 2.0}},
		}},
		{Stage: "stage1-ring", Benchmark: "H2D/size=1MiB", Metrics: []records.Metric{
			{Unit: "ns/op", Best: 30000, Median: 30000, Min: 30000, Max: 40000, Values: []float64{40000, 30000}},
			{Unit: "B/s", Best: 30000e6, Median: 25000e6, Min: 25000e6, Max: 30000e6, Values: []float64{25000e6, 30000e6}},
			{Unit: "cores", Best: 1.9, Median: 1.9, Min: 1.9, Max: 2.1, Values: []float64{1.9, 2.1}},
		}},
	}
	wantLimits := []records.Row{
		{Stage: "stage0-mailbox", Benchmark: "Baseline/pingpong", Metrics: []records.Metric{
			{Unit: "ns/op", Best: 110, Median: 110, Min: 110, Max: 120, Values: []float64{120, 110}},
		}},
	}
	if !approxRows(rows, wantRows) {
		t.Errorf("Summarise() rows =\n%+v\nwant\n%+v", rows, wantRows)
	}
	if !approxRows(limits, wantLimits) {
		t.Errorf("Summarise() limits =\n%+v\nwant\n%+v", limits, wantLimits)
	}
}

// approxRows compares rows allowing for floating-point rounding in
// medians and unit conversion.
func approxRows(got, want []records.Row) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Stage != w.Stage || g.Benchmark != w.Benchmark || len(g.Metrics) != len(w.Metrics) {
			return false
		}
		for j := range g.Metrics {
			gm, wm := g.Metrics[j], w.Metrics[j]
			if gm.Unit != wm.Unit || !approx(gm.Best, wm.Best) || !approx(gm.Median, wm.Median) ||
				!approx(gm.Min, wm.Min) || !approx(gm.Max, wm.Max) || len(gm.Values) != len(wm.Values) {
				return false
			}
			for k := range gm.Values {
				if !approx(gm.Values[k], wm.Values[k]) {
					return false
				}
			}
		}
	}
	return true
}

func approx(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-9*max(abs(a), abs(b), 1)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestText(t *testing.T) {
	res := &Result{Passes: []Pass{
		{Attempt: 1, Runs: []StageRun{
			{Stage: "stage0-mailbox", Output: output(t, "goos: linux\npkg: softgpu/stage0-mailbox\nBenchmarkX-2 1 5 ns/op\nPASS\n")},
			{Stage: "stage1-ring", Output: output(t, "goos: linux\npkg: softgpu/stage1-ring\nBenchmarkX-2 1 4 ns/op\nPASS\n")},
		}},
		{Attempt: 2, Runs: []StageRun{
			{Stage: "stage1-ring", Output: output(t, "goos: linux\npkg: softgpu/stage1-ring\nBenchmarkX-2 1 3 ns/op\nPASS\n")},
		}},
	}}
	got, err := Text(res)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"goos: linux", "stage: stage0-mailbox", "BenchmarkX-2 1 5 ns/op",
		"goos: linux", "stage: stage1-ring", "BenchmarkX-2 1 4 ns/op",
		"goos: linux", "stage: stage1-ring", "BenchmarkX-2 1 3 ns/op", "",
	}, "\n")
	if string(got) != want {
		t.Errorf("Text() = %q; want %q", got, want)
	}
}

func TestNewRecord(t *testing.T) {
	cfg := testConfig("stage0-mailbox")
	res := &Result{
		Passes:   []Pass{{Attempt: 2, Runs: []StageRun{{Stage: "stage0-mailbox", Output: output(t, "BenchmarkFill/size=64B-2 1 5 ns/op\n")}}}},
		Canary:   []records.Canary{{Pass: 1, Before: 300, After: 300, Rejected: true}, {Pass: 2, Before: 100, After: 110}},
		Rejected: 1,
	}
	rec := NewRecord("smoke", cfg, res, Provenance{Machine: records.Machine{Label: "this machine"}, Command: "go run ./tools/cmd/record -name smoke"})
	if rec.Schema != records.SchemaVersion || rec.Name != "smoke" || rec.Rejected != 1 || len(rec.Canary) != 2 || len(rec.Rows) != 1 {
		t.Errorf("NewRecord() = %+v; want schema %d, name smoke, 1 rejected, 2 canaries, 1 row", rec, records.SchemaVersion)
	}
	if want := (records.Settings{Stages: []string{"stage0-mailbox"}, Bench: ".", Benchtime: "1x", Passes: 2, Threshold: 0.5}); !reflect.DeepEqual(rec.Settings, want) {
		t.Errorf("NewRecord().Settings = %+v; want %+v", rec.Settings, want)
	}
}
