package records

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBestAndMedian(t *testing.T) {
	tests := []struct {
		name       string
		unit       string
		values     []float64
		wantBest   float64
		wantMedian float64
	}{
		{"time: lowest", "ns/op", []float64{300, 100, 200}, 100, 200},
		{"bandwidth: highest", "B/s", []float64{3e9, 5e9, 4e9}, 5e9, 4e9},
		{"even count: the lower middle, not a mean", "MB/s", []float64{1, 2}, 2, 1},
		{"four values", "cores", []float64{2.0, 1.9, 2.1, 2.0}, 1.9, 2.0},
		{"even count, unsorted", "ns/op", []float64{40, 10, 30, 20}, 10, 20},
		{"custom rate", "ops/s", []float64{10, 30}, 30, 10},
		{"custom count: lowest", "preempts/op", []float64{0.9, 0.1, 0.5}, 0.1, 0.5},
		{"one value", "p99-ns", []float64{7}, 7, 7},
		{"no values", "ns/op", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantBest, Best(tt.unit, tt.values), "Best(%s, %v)", tt.unit, tt.values)
			assert.Equal(t, tt.wantMedian, Median(tt.values), "Median(%v)", tt.values)
		})
	}
}

func TestNewMetricAndSpread(t *testing.T) {
	tests := []struct {
		name       string
		unit       string
		values     []float64
		want       Metric
		wantSpread float64
	}{
		{"five passes", "ns/op", []float64{110, 100, 130, 120, 100},
			Metric{Unit: "ns/op", Best: 100, Median: 110, Min: 100, Max: 130}, 30.0 / 110},
		{"rate", "B/s", []float64{2e9, 4e9},
			Metric{Unit: "B/s", Best: 4e9, Median: 2e9, Min: 2e9, Max: 4e9}, 1},
		{"all equal", "cores", []float64{1, 1, 1}, Metric{Unit: "cores", Best: 1, Median: 1, Min: 1, Max: 1}, 0},
		{"zero median", "preempts/op", []float64{0, 0, 1}, Metric{Unit: "preempts/op", Best: 0, Median: 0, Min: 0, Max: 1}, math.Inf(1)},
		{"none", "ns/op", nil, Metric{Unit: "ns/op"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewMetric(tt.unit, tt.values)
			tt.want.Values = tt.values
			assert.Equal(t, tt.want, got, "NewMetric(%s, %v)", tt.unit, tt.values)
			if s := got.Spread(); math.Abs(s-tt.wantSpread) > 1e-12 && s != tt.wantSpread {
				t.Errorf("NewMetric(%s, %v).Spread() = %v; want %v", tt.unit, tt.values, s, tt.wantSpread)
			}
		})
	}
}

func TestRowCanary(t *testing.T) {
	row := Row{Canary: []RowCanary{
		{Pass: 1, Before: 55, After: 60},   // steady
		{Pass: 2, Before: 110, After: 330}, // moved: ×3
		{Pass: 3, Before: 130, After: 100}, // exactly 1.3: steady
		{Pass: 4, Before: 0, After: 100},   // not a reading
	}}
	tests := []struct {
		pass       int
		wantRatio  float64
		wantSteady bool
	}{
		{1, 60.0 / 55, true},
		{2, 3, false},
		{3, 1.3, true},
		{4, math.Inf(1), false},
	}
	for _, tt := range tests {
		c, ok := row.CanaryOf(tt.pass)
		if !ok {
			t.Fatalf("CanaryOf(%d) found nothing", tt.pass)
		}
		if r := c.Ratio(); math.Abs(r-tt.wantRatio) > 1e-12 && r != tt.wantRatio {
			t.Errorf("pass %d: Ratio() = %v; want %v", tt.pass, r, tt.wantRatio)
		}
		assert.Equal(t, tt.wantSteady, c.Steady(DefaultCanaryTolerance), "pass %d: Steady(%v)", tt.pass, DefaultCanaryTolerance)
	}
	if _, ok := row.CanaryOf(5); ok {
		t.Errorf("CanaryOf(5) found a canary; the row ran in 4 passes")
	}
	assert.Equal(t, []int{1, 3}, row.SteadyPasses(DefaultCanaryTolerance), "SteadyPasses(1.3)")
	if got := (Row{}).SteadyPasses(DefaultCanaryTolerance); got != nil {
		t.Errorf("SteadyPasses of a row without canaries = %v; want nil", got)
	}
}

const schema1 = `{
  "schema": 1,
  "name": "old",
  "machine": {"label": "this machine", "cpu": "x", "cores": 2, "os": "Linux"},
  "date": "2026-11-30T20:22:00Z",
  "commit": "f7bc03a38c108858cceb2f74bcac0fcc970d8813+dirty",
  "command": "go run ./tools/cmd/record -name old",
  "settings": {"passes": 2, "threshold": 0.5},
  "canary": [{"pass": 1, "before_ns": 110, "after_ns": 120}, {"pass": 2, "before_ns": 330, "after_ns": 300, "rejected": true}],
  "rejected": 1,
  "rows": [{"stage": "stage0-mailbox", "benchmark": "Fill/size=64B",
            "metrics": [{"unit": "ns/op", "best": 100, "median": 150, "values": [200, 100]}]}]
}`

func TestLoadSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	require.NoError(t, os.WriteFile(path, []byte(schema1), 0o644))
	rec, err := Load(path)
	require.NoError(t, err, "Load(schema 1)")
	want := Metric{Unit: "ns/op", Best: 100, Median: 150, Min: 100, Max: 200, Values: []float64{200, 100}}
	assert.Equal(t, want, rec.Rows[0].Metrics[0], "schema-1 metric; want %+v (min and max filled, median as stored)", want)
	if rec.Schema != 1 || !rec.Dirty || rec.Commit != "f7bc03a38c108858cceb2f74bcac0fcc970d8813+dirty" {
		t.Errorf("schema-1 record: schema %d, dirty %v, commit %q; want 1, true, the commit as written", rec.Schema, rec.Dirty, rec.Commit)
	}
	assert.NoError(t, Validate(rec), "Validate(schema-1 record)")
}

// TestLoadBookRecords reads every record the book is built from: each
// must load and validate, whichever schema it was written in.
func TestLoadBookRecords(t *testing.T) {
	recs, err := LoadDir("../../../book/records")
	require.NoError(t, err)
	if len(recs) == 0 {
		t.Fatal("no records in book/records")
	}
	for name, rec := range recs {
		assert.NoError(t, Validate(rec), "book/records/%s.json", name)
	}
}

func TestSaveLoad(t *testing.T) {
	rec := validRecord()
	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, Save(path, rec))
	got, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, rec, got, "Load(Save(rec))")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, key := range []string{`"schema": 2`, `"dirty": true`, `"rows_rerun": 1`, `"min": 100`, `"max": 120`,
		`"canary": [`, `"before_ns": 55`, `"reruns": 2`, `"unsteady": true`, `"canary_tolerance": 1.3`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("saved record lacks %s:\n%s", key, data)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, json string
		wantErr    error
		wantText   string
	}{
		{"future schema", `{"schema": 3, "name": "x"}`, ErrSchema, "has schema 3"},
		{"no schema", `{"name": "x"}`, ErrSchema, "has schema 0"},
		{"no name", `{"schema": 2}`, nil, "no name"},
		{"not json", `{`, nil, "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.json")
			require.NoError(t, os.WriteFile(path, []byte(tt.json), 0o644))
			_, err := Load(path)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Load(%s) error = %v; want %v mentioning %q", tt.json, err, tt.wantErr, tt.wantText)
			}
		})
	}
}

// validRecord is a small schema-2 record that passes Validate.
func validRecord() *Record {
	return &Record{
		Schema: SchemaVersion, Name: "r", Date: "2026-11-30T20:22:00Z",
		Machine: Machine{Label: "this machine", CPU: "x", Cores: 2, OS: "Linux"},
		Commit:  "0123456789abcdef0123456789abcdef01234567", Dirty: true,
		Command:   "go run ./tools/cmd/record -name r",
		Settings:  Settings{Passes: 2, CanaryTolerance: 1.3, MaxReruns: 3},
		Canary:    []Canary{{Pass: 1, Before: 60, After: 61}, {Pass: 2, Before: 62, After: 60}},
		RowsRerun: 1,
		Limits: []Row{{Stage: "stage0-mailbox", Benchmark: "Baseline/pingpong",
			Metrics: []Metric{NewMetric("ns/op", []float64{60, 58})}}},
		Rows: []Row{{Stage: "stage0-mailbox", Benchmark: "Fill/size=64B",
			Metrics:  []Metric{NewMetric("ns/op", []float64{120, 100}), NewMetric("B/s", []float64{5e8, 6e8})},
			Canary:   []RowCanary{{Pass: 1, Before: 55, After: 60}, {Pass: 2, Before: 56, After: 90}},
			Reruns:   2,
			Unsteady: true,
		}},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Record)
		want   string // "" for a valid record
	}{
		{"valid", func(*Record) {}, ""},
		{"negative time", func(r *Record) { r.Rows[0].Metrics[0].Values[1] = -5 },
			"records: r: stage0-mailbox Fill/size=64B: ns/op: value 2 is -5: a measurement cannot be negative"},
		{"NaN", func(r *Record) { r.Rows[0].Metrics[0].Median = math.NaN() },
			"records: r: stage0-mailbox Fill/size=64B: ns/op: median is NaN"},
		{"infinite limit", func(r *Record) { r.Limits[0].Metrics[0].Best = math.Inf(1) },
			"records: r: stage0-mailbox Baseline/pingpong: ns/op: best is +Inf"},
		{"zero rate", func(r *Record) { r.Rows[0].Metrics[1] = NewMetric("B/s", []float64{0, 6e8}) },
			"records: r: stage0-mailbox Fill/size=64B: B/s: value 1 is 0: a rate must be positive"},
		{"negative cores", func(r *Record) { r.Rows[0].Metrics[0] = NewMetric("cores", []float64{1, -0.1}) },
			"cores: value 2 is -0.1"},
		{"negative onpath-share, a signed unit", func(r *Record) {
			r.Rows[0].Metrics = append(r.Rows[0].Metrics, NewMetric("onpath-share", []float64{-0.68, 0.2}))
		}, ""},
		{"negative floor-ratio", func(r *Record) {
			r.Rows[0].Metrics = append(r.Rows[0].Metrics, NewMetric("floor-ratio", []float64{-0.68, 0.2}))
		}, "floor-ratio: value 1 is -0.68: a measurement cannot be negative"},
		{"machine cores", func(r *Record) { r.Machine.Cores = -1 }, "records: r: machine cores -1"},
		{"no rows", func(r *Record) { r.Rows = nil }, "records: r: no rows"},
		{"no metrics", func(r *Record) { r.Rows[0].Metrics = nil }, "records: r: stage0-mailbox Fill/size=64B: no metrics"},
		{"no values", func(r *Record) { r.Rows[0].Metrics[0].Values = nil }, "records: r: stage0-mailbox Fill/size=64B: ns/op: no values"},
		{"min above max", func(r *Record) { r.Rows[0].Metrics[0].Min = 200 }, "ns/op: min 200 is above max 120"},
		{"best out of range", func(r *Record) { r.Rows[0].Metrics[0].Best = 90 }, "ns/op: best 90 is outside [min 100, max 120]"},
		{"row canary", func(r *Record) { r.Rows[0].Canary[1].After = 0 }, "Fill/size=64B: canary of pass 2 reads 0 ns"},
		{"pass canary", func(r *Record) { r.Canary[0].Before = math.NaN() }, "records: r: canary of pass 1 reads NaN ns"},
		{"duplicate row", func(r *Record) { r.Rows = append(r.Rows, r.Rows[0]) }, "stage0-mailbox Fill/size=64B: row listed twice"},
		{"no name", func(r *Record) { r.Name = "" }, "records: (unnamed): no name"},
		{"transcription", func(r *Record) { r.Transcribed, r.Source, r.Commit, r.Canary = true, "notes", "", nil }, ""},
		{"transcription without source", func(r *Record) { r.Transcribed, r.Commit, r.Canary = true, "", nil },
			"records: r: transcribed, but no source"},
		{"transcription with commit", func(r *Record) { r.Transcribed, r.Source = true, "notes" },
			"records: r: transcribed, but with a commit or a canary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := validRecord()
			tt.change(rec)
			err := Validate(rec)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}
