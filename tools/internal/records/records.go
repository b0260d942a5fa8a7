// Package records defines the benchmark record: the JSON file under
// book/records/ that the book reproduces and that readers can re-create with
// tools/cmd/record. One record is one run of the record tool, or one
// transcription of a document's figures (seed 004's tables of the reference
// machine, the project's machine notes), marked "transcribed".
//
// A record says where its figures came from (machine, date, commit, whether
// the tree was dirty, the exact command) and how they were measured, so that
// a figure in the book can always be traced back to a command that
// reproduces it.
//
// # Schema 2 (written by this version)
//
//	{
//	  "schema": 2,
//	  "name": "stages",                      file name without .json
//	  "machine": {"label", "cpu", "cores", "os", "kernel", "go"},
//	  "reference": false,                    true for the reference machine's figures (seed 004)
//	  "transcribed": false,                  true for figures copied by hand from the document in "source"
//	  "date": "2026-11-30T20:22:00Z",        RFC 3339, when the run started
//	  "commit": "<40 hex digits>",           git rev-parse HEAD of the measured tree
//	  "dirty": true,                         present only when made with -allow-dirty
//	  "command": "go run ./tools/cmd/record -name stages",
//	  "source", "notes",                     free text; a transcription's source is required
//	  "settings": {"stages", "bench", "benchtime", "passes",
//	               "canary_tolerance", "max_reruns", "env"},
//	  "canary": [{"pass", "before_ns", "after_ns"}],   the pass-level canary, one per pass
//	  "rejected": 0,                         schema 1 only (passes its gate threw away)
//	  "rows_rerun": 3,                       rows re-run at least once because their canary moved
//	  "limits": [Row],                       Baseline/... rows: the machine's own limits
//	  "rows":   [Row]                        every other benchmark of every stage
//	}
//
//	Row:    {"stage", "benchmark", "metrics": [Metric],
//	         "canary": [{"pass", "before_ns", "after_ns"}],  one per pass the row ran in
//	         "reruns": 2,                    re-runs of this row over all passes (omitted when 0)
//	         "unsteady": true}               some pass kept a value whose canary moved (omitted when false)
//	Metric: {"unit", "best", "median", "min", "max", "values": [one per pass]}
//
// Values are in pass order; a row's canary[i] and every metric's values[i]
// come from the same run of the row. Best is the lowest value (the highest
// for rates such as B/s); median is the lower middle value for an even
// count, so it is always a value that was observed; min and max bound the
// values. Bandwidth is in B/s.
//
// The per-row canary is a bare two-thread ping-pong the benchmark process
// measures right before the row opens its device and right after it closes
// it. When the two disagree by more than settings.canary_tolerance (max/min),
// the machine moved between placement clusters during the row, and the
// record tool re-ran the row; RowCanary.Steady tells a reader which values
// were measured in one placement.
//
// # Schema 1
//
// Load still reads schema 1 (no min/max, no per-row canary, a pass-level
// gate, "+dirty" appended to the commit): it fills Min and Max from Values
// and sets Dirty from the "+dirty" suffix, leaving Schema at 1 so a reader
// can tell. A schema-1 median of an even count is the mean of the middle
// two, as that version computed it.
package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// SchemaVersion is the schema this package writes. It is bumped whenever a
// field changes meaning; Load reads this version and the ones listed in
// readable, and refuses any other rather than misreading it.
const SchemaVersion = 2

// readable are the schema versions Load understands.
var readable = []int{1, SchemaVersion}

// DefaultCanaryTolerance is the largest max/min ratio of a row's two
// canaries for which the row counts as measured in one placement.
const DefaultCanaryTolerance = 1.3

// Record is one record file.
type Record struct {
	Schema  int     `json:"schema"`
	Name    string  `json:"name"`    // file name without extension, e.g. "stages"
	Machine Machine `json:"machine"` // where it was measured
	// Reference is true for the reference machine's figures (seed 004), which
	// the book shows beside this machine's.
	Reference bool `json:"reference,omitempty"`
	// Transcribed is true for figures copied by hand from the document named
	// in Source (seed 004's tables, the project's machine notes) rather than
	// measured by the record tool: such a record has no command to re-run,
	// no command that re-makes it, no passes and no commit, so record -retake leaves it alone and the book
	// never calls it stale. Any schema may carry it.
	Transcribed bool   `json:"transcribed,omitempty"`
	Date        string `json:"date"`             // RFC 3339, when the run started
	Commit      string `json:"commit,omitempty"` // git commit of the measured tree (schema 1: "+dirty" if modified)
	Dirty       bool   `json:"dirty,omitempty"`  // the tree had uncommitted changes (record -allow-dirty)
	Command     string `json:"command"`          // the exact command that produced the record
	Source      string `json:"source,omitempty"` // for transcriptions: the document the figures came from
	Notes       string `json:"notes,omitempty"`

	Settings  Settings `json:"settings"`
	Canary    []Canary `json:"canary,omitempty"` // the pass-level canary, one entry per pass
	Rejected  int      `json:"rejected"`         // schema 1: passes its canary gate rejected; 0 from schema 2
	RowsRerun int      `json:"rows_rerun"`       // rows re-run at least once because their own canary moved
	Limits    []Row    `json:"limits,omitempty"` // the machine's own limits (Baseline/...)
	Rows      []Row    `json:"rows"`             // one per stage and benchmark
}

// Machine describes the computer a record was made on.
type Machine struct {
	Label  string `json:"label"` // short name for tables: "this machine", "reference VM"
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	OS     string `json:"os"`
	Kernel string `json:"kernel,omitempty"`
	Go     string `json:"go,omitempty"`
}

// Settings are the knobs of the run that made the record.
type Settings struct {
	Stages          []string `json:"stages,omitempty"`
	Bench           string   `json:"bench,omitempty"`            // -bench regexp
	Benchtime       string   `json:"benchtime,omitempty"`        // -benchtime
	Passes          int      `json:"passes,omitempty"`           // passes run (schema 1: accepted passes wanted)
	Threshold       float64  `json:"threshold,omitempty"`        // schema 1: its pass gate's allowed slowdown over the best canary
	CanaryTolerance float64  `json:"canary_tolerance,omitempty"` // largest max/min of a row's canaries counted as steady
	MaxReruns       int      `json:"max_reruns,omitempty"`       // re-runs allowed per row and pass
	Env             []string `json:"env,omitempty"`              // environment overrides, e.g. SOFTGPU_IDLE=spin
}

// Canary is the pass-level canary: Baseline/pingpong measured in its own
// process before and after one pass. From schema 2 it is informational (it
// shows how the machine drifted over the run); rows carry their own canary.
type Canary struct {
	Pass     int     `json:"pass"`               // 1-based pass (schema 1: attempt) number
	Stage    string  `json:"stage,omitempty"`    // stage whose run the canary bracketed, if per stage
	Before   float64 `json:"before_ns"`          // Baseline/pingpong ns/op before the pass
	After    float64 `json:"after_ns"`           // and after it
	Rejected bool    `json:"rejected,omitempty"` // schema 1: the gate threw this pass away
}

// Row is one benchmark of one stage, with every metric it reported.
type Row struct {
	Stage     string      `json:"stage"`     // stage directory, e.g. "stage1-ring"
	Benchmark string      `json:"benchmark"` // full name without "Benchmark" and the -N suffix, e.g. "FillStream/size=64B/depth=16"
	Metrics   []Metric    `json:"metrics"`
	Canary    []RowCanary `json:"canary,omitempty"`   // one per pass the row ran in, aligned with each metric's Values
	Reruns    int         `json:"reruns,omitempty"`   // re-runs over all passes because the canary moved
	Unsteady  bool        `json:"unsteady,omitempty"` // in some pass no attempt kept the canary still
}

// RowCanary is the canary measured in the row's own process around the run
// that gave one pass's values: before the device opened and after it closed.
type RowCanary struct {
	Pass   int     `json:"pass"`      // 1-based pass number
	Before float64 `json:"before_ns"` // ns per ping-pong round trip
	After  float64 `json:"after_ns"`
}

// Metric is one unit of one row across the passes.
type Metric struct {
	Unit   string    `json:"unit"`   // as go test prints it: "ns/op", "B/s", "cores", "p99-ns", ...
	Best   float64   `json:"best"`   // best pass (lowest, or highest for rates such as B/s and MB/s)
	Median float64   `json:"median"` // the lower middle of Values: always an observed value
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Values []float64 `json:"values"` // one per pass, in pass order
}

// HigherIsBetter reports whether larger values of unit are better (rates);
// for every other unit (times, cores, counts per op) smaller is better.
func HigherIsBetter(unit string) bool {
	switch unit {
	case "B/s", "MB/s", "GB/s", "ops/s":
		return true
	}
	return strings.HasSuffix(unit, "/s")
}

// Signed reports whether a unit may read below zero: a difference of two
// measurements rather than a measurement. The one such unit is
// onpath-share (BenchmarkRoundTripFloor): a round trip's excess over the
// bare handoff, as a share of the stage's own code run alone. A round trip
// that beats the handoff — stage 0's mailbox, whose lines are not the
// handoff's — reads below zero, and that is a finding, not a broken run.
func Signed(unit string) bool { return unit == "onpath-share" }

// Metric returns the row's metric with the given unit.
func (r Row) Metric(unit string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Unit == unit {
			return m, true
		}
	}
	return Metric{}, false
}

// Find returns the row for stage and benchmark.
func (rec *Record) Find(stage, benchmark string) (Row, bool) {
	for _, r := range rec.Rows {
		if r.Stage == stage && r.Benchmark == benchmark {
			return r, true
		}
	}
	for _, r := range rec.Limits {
		if (stage == "" || r.Stage == stage) && r.Benchmark == benchmark {
			return r, true
		}
	}
	return Row{}, false
}

// CanaryTolerance is the tolerance the record was made with, or
// DefaultCanaryTolerance for a record that does not say.
func (rec *Record) CanaryTolerance() float64 {
	if rec.Settings.CanaryTolerance > 0 {
		return rec.Settings.CanaryTolerance
	}
	return DefaultCanaryTolerance
}

// Sort orders rows by stage, in the order given (unknown stages last,
// alphabetically), keeping each stage's rows in the order they arrived —
// the order the benchmarks ran, which is their order in the source file and
// reads naturally (4KiB before 64KiB before 1MiB), and is deterministic.
func (rec *Record) Sort(order []string) {
	rank := map[string]int{}
	for i, s := range order {
		rank[s] = i
	}
	less := func(a, b Row) bool {
		ra, oka := rank[a.Stage]
		rb, okb := rank[b.Stage]
		switch {
		case oka && okb:
			return ra < rb
		case oka != okb:
			return oka
		}
		return a.Stage < b.Stage
	}
	sort.SliceStable(rec.Rows, func(i, j int) bool { return less(rec.Rows[i], rec.Rows[j]) })
	sort.SliceStable(rec.Limits, func(i, j int) bool { return less(rec.Limits[i], rec.Limits[j]) })
}

// ErrSchema is returned by Load for a record of a schema version it cannot
// read.
var ErrSchema = errors.New("records: unsupported schema version")

// Load reads one record file, upgrading a schema-1 record in memory (see the
// package comment). It checks the schema and the name, not the values: the
// book calls Validate for that.
func Load(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("records: %s: %w", path, err)
	}
	switch rec.Schema {
	case 1:
		upgrade1(&rec)
	case SchemaVersion:
	default:
		return nil, fmt.Errorf("%w: %s has schema %d, this tool reads %v", ErrSchema, path, rec.Schema, readable)
	}
	if rec.Name == "" {
		return nil, fmt.Errorf("records: %s: no name", path)
	}
	return &rec, nil
}

// upgrade1 fills what schema 1 did not store: Min and Max from Values, and
// Dirty from the "+dirty" the commit then carried (the commit is kept as
// written, so the record still names exactly what it named).
func upgrade1(rec *Record) {
	for _, rows := range [][]Row{rec.Rows, rec.Limits} {
		for i := range rows {
			for j := range rows[i].Metrics {
				m := &rows[i].Metrics[j]
				if len(m.Values) > 0 {
					m.Min, m.Max = minMax(m.Values)
				}
			}
		}
	}
	if strings.HasSuffix(rec.Commit, "+dirty") {
		rec.Dirty = true
	}
}

// LoadDir reads every *.json record in dir, keyed by record name.
func LoadDir(dir string) (map[string]*Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]*Record{}
	for _, p := range paths {
		rec, err := Load(p)
		if err != nil {
			return nil, err
		}
		out[rec.Name] = rec
	}
	return out, nil
}

// Marshal returns rec as the indented JSON a record file holds.
func Marshal(rec *Record) ([]byte, error) {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Save writes rec as indented JSON to path atomically (WriteFileAtomic).
func Save(path string, rec *Record) error {
	data, err := Marshal(rec)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data)
}
