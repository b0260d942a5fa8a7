package record

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/records"
)

func output(t *testing.T, text string) *benchfmt.Output {
	t.Helper()
	out, err := benchfmt.ParseString(text)
	require.NoError(t, err, "ParseString(%q)", text)
	return out
}

func TestSummarise(t *testing.T) {
	passes := []Pass{
		{Number: 1, Runs: []StageRun{
			{Stage: "stage0-mailbox", Output: output(t, "pkg: softgpu/stage0-mailbox\n"+
				"BenchmarkBaseline/pingpong-2 100 120 ns/op\n"+
				"BenchmarkH2D/size=1MiB-2 10 50000 ns/op 20000 MB/s 2.0 cores\n"),
				Rows: map[string]RowRun{"H2D/size=1MiB": {HasCanary: true, Canary: records.RowCanary{Before: 55, After: 60}, Reruns: 2}}},
			{Stage: "stage1-ring", Output: output(t, "pkg: softgpu/stage1-ring\n"+
				"BenchmarkH2D/size=1MiB-2 10 40000 ns/op 25000 MB/s 1.9 cores\n"),
				Rows: map[string]RowRun{"H2D/size=1MiB": {HasCanary: true, Canary: records.RowCanary{Before: 110, After: 112}}}},
		}},
		{Number: 2, Runs: []StageRun{
			{Stage: "stage1-ring", Output: output(t, "pkg: softgpu/stage1-ring\n"+
				"BenchmarkH2D/size=1MiB-2 10 30000 ns/op 30000 MB/s 2.1 cores\n"),
				Rows: map[string]RowRun{"H2D/size=1MiB": {HasCanary: true, Canary: records.RowCanary{Before: 330, After: 110}, Reruns: 3, Unsteady: true}}},
			{Stage: "stage0-mailbox", Output: output(t, "pkg: softgpu/stage0-mailbox\n"+
				"BenchmarkBaseline/pingpong-2 100 110 ns/op\n"+
				// Reported twice in one pass: the pass contributes the median
				// (the lower middle of the two), and its canary once.
				"BenchmarkH2D/size=1MiB-2 10 60000 ns/op 18000 MB/s 2.0 cores\n"+
				"BenchmarkH2D/size=1MiB-2 10 70000 ns/op 16000 MB/s 2.2 cores\n"),
				Rows: map[string]RowRun{"H2D/size=1MiB": {HasCanary: true, Canary: records.RowCanary{Before: 56, After: 57}}}},
		}},
	}
	rows, limits := Summarise(passes, []string{"stage0-mailbox", "stage1-ring"})

	wantRows := []records.Row{
		{Stage: "stage0-mailbox", Benchmark: "H2D/size=1MiB", Metrics: []records.Metric{
			{Unit: "ns/op", Best: 50000, Median: 50000, Min: 50000, Max: 60000, Values: []float64{50000, 60000}},
			{Unit: "B/s", Best: 20000e6, Median: 16000e6, Min: 16000e6, Max: 20000e6, Values: []float64{20000e6, 16000e6}},
			{Unit: "cores", Best: 2.0, Median: 2.0, Min: 2.0, Max: 2.0, Values: []float64{2.0, 2.0}},
		}, Canary: []records.RowCanary{{Pass: 1, Before: 55, After: 60}, {Pass: 2, Before: 56, After: 57}}, Reruns: 2},
		{Stage: "stage1-ring", Benchmark: "H2D/size=1MiB", Metrics: []records.Metric{
			{Unit: "ns/op", Best: 30000, Median: 30000, Min: 30000, Max: 40000, Values: []float64{40000, 30000}},
			{Unit: "B/s", Best: 30000e6, Median: 25000e6, Min: 25000e6, Max: 30000e6, Values: []float64{25000e6, 30000e6}},
			{Unit: "cores", Best: 1.9, Median: 1.9, Min: 1.9, Max: 2.1, Values: []float64{1.9, 2.1}},
		}, Canary: []records.RowCanary{{Pass: 1, Before: 110, After: 112}, {Pass: 2, Before: 330, After: 110}}, Reruns: 3, Unsteady: true},
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
		if g.Stage != w.Stage || g.Benchmark != w.Benchmark || len(g.Metrics) != len(w.Metrics) ||
			!reflect.DeepEqual(g.Canary, w.Canary) || g.Reruns != w.Reruns || g.Unsteady != w.Unsteady {
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
		{Number: 1, Runs: []StageRun{
			{Stage: "stage0-mailbox", Output: output(t, "goos: linux\npkg: softgpu/stage0-mailbox\nBenchmarkX-2 1 5 ns/op\nPASS\n")},
			{Stage: "stage1-ring", Output: output(t, "goos: linux\npkg: softgpu/stage1-ring\nBenchmarkX-2 1 4 ns/op\nPASS\n")},
		}},
		{Number: 2, Runs: []StageRun{
			{Stage: "stage1-ring", Output: output(t, "goos: linux\npkg: softgpu/stage1-ring\nBenchmarkX-2 1 3 ns/op\nPASS\n")},
		}},
	}}
	got, err := Text(res)
	require.NoError(t, err)
	want := strings.Join([]string{
		"goos: linux", "stage: stage0-mailbox", "BenchmarkX-2 1 5 ns/op",
		"goos: linux", "stage: stage1-ring", "BenchmarkX-2 1 4 ns/op",
		"goos: linux", "stage: stage1-ring", "BenchmarkX-2 1 3 ns/op", "",
	}, "\n")
	assert.Equal(t, want, string(got), "Text() = %q", got)
}

func TestNewRecord(t *testing.T) {
	cfg := testConfig("stage0-mailbox")
	cfg.Env = []string{"SOFTGPU_IDLE=spin"}
	res := &Result{
		Passes: []Pass{{Number: 1, Runs: []StageRun{{Stage: "stage0-mailbox",
			Output: output(t, "BenchmarkFill/size=64B-2 1 5 ns/op\nBenchmarkQuiet-2 1 1 ns/op\nBenchmarkBaseline/pingpong-2 1 60 ns/op\n"),
			Rows: map[string]RowRun{
				"Fill/size=64B": {HasCanary: true, Canary: records.RowCanary{Before: 55, After: 60}, Reruns: 1},
				"Quiet":         {HasCanary: true, Canary: records.RowCanary{Before: 55, After: 58}},
			}}}}},
		Canary: []records.Canary{{Pass: 1, Before: 100, After: 110}},
		Reruns: 1,
	}
	prov := Provenance{Machine: records.Machine{Label: "this machine", Cores: 2}, Command: "go run ./tools/cmd/record -name smoke",
		Commit: "0123456789abcdef0123456789abcdef01234567", Dirty: true}
	rec := NewRecord("smoke", cfg, res, prov)
	if rec.Schema != records.SchemaVersion || rec.Name != "smoke" || rec.RowsRerun != 1 || rec.Rejected != 0 ||
		len(rec.Canary) != 1 || len(rec.Rows) != 2 || len(rec.Limits) != 1 || !rec.Dirty || rec.Commit != prov.Commit {
		t.Errorf("NewRecord() = %+v; want schema %d, name smoke, 1 row re-run, 1 canary, 2 rows, 1 limit, dirty, the commit", rec, records.SchemaVersion)
	}
	want := records.Settings{Stages: []string{"stage0-mailbox"}, Bench: ".", Benchtime: "1ms", Passes: 2,
		CanaryTolerance: 1.3, MaxReruns: 3, Env: []string{"SOFTGPU_IDLE=spin"}}
	assert.Equal(t, want, rec.Settings, "NewRecord().Settings")
	if !strings.Contains(rec.Notes, "SOFTGPU_CANARY=1") || !strings.Contains(rec.Notes, "×1.3") {
		t.Errorf("NewRecord().Notes does not explain the canary: %q", rec.Notes)
	}
	assert.NoError(t, records.Validate(rec), "Validate(NewRecord())")
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "records")
	rec := &records.Record{Schema: records.SchemaVersion, Name: "smoke", Rows: []records.Row{}}
	require.NoError(t, Write(dir, rec, []byte("stage: stage0-mailbox\n")))
	jsonPath, textPath := Paths(dir, "smoke")
	for _, p := range []string{jsonPath, textPath} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, mode %v; want a file with mode 0644", p, err, fi.Mode().Perm())
		}
	}
	if got, err := records.Load(jsonPath); err != nil || got.Name != "smoke" {
		t.Errorf("Load(written record) = %+v, %v", got, err)
	}
}
