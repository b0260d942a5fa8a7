// Package records defines the benchmark record: the JSON file under
// book/records/ that the book reproduces and that readers can re-create with
// tools/cmd/record. One record is one run of the record tool (or, for the
// reference machine, one transcription of seed 004's tables).
//
// A record says where its figures came from (machine, date, commit, the exact
// command) and how they were selected (canary-gated passes, best pass per row,
// median beside it), so that a figure in the book can always be traced back to
// a command that reproduces it.
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

// SchemaVersion is bumped whenever a field changes meaning. Load refuses a
// record written with a different version rather than misreading it.
const SchemaVersion = 1

// Record is one record file.
type Record struct {
	Schema  int     `json:"schema"`
	Name    string  `json:"name"`    // file name without extension, e.g. "stages"
	Machine Machine `json:"machine"` // where it was measured
	// Reference is true for figures transcribed from the reference machine
	// (seed 004), false for figures measured by this project's own tools.
	Reference bool   `json:"reference,omitempty"`
	Date      string `json:"date"`             // RFC 3339, when the run started
	Commit    string `json:"commit,omitempty"` // git commit of the measured tree ("+dirty" if modified)
	Command   string `json:"command"`          // the exact command that produced the record
	Source    string `json:"source,omitempty"` // for transcriptions: the document the figures came from
	Notes     string `json:"notes,omitempty"`

	Settings Settings `json:"settings"`
	Canary   []Canary `json:"canary,omitempty"` // one entry per pass attempted, accepted or not
	Rejected int      `json:"rejected"`         // passes rejected by the canary gate
	Limits   []Row    `json:"limits,omitempty"` // the machine's own limits (Baseline/...), best over the run
	Rows     []Row    `json:"rows"`             // one per stage and benchmark
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
	Stages    []string `json:"stages,omitempty"`
	Bench     string   `json:"bench,omitempty"`     // -bench regexp
	Benchtime string   `json:"benchtime,omitempty"` // -benchtime
	Passes    int      `json:"passes,omitempty"`    // accepted passes wanted
	Threshold float64  `json:"threshold,omitempty"` // canary gate: reject a pass whose canary exceeds best × (1+Threshold)
	Env       []string `json:"env,omitempty"`       // environment overrides, e.g. SOFTGPU_IDLE=spin
}

// Canary is the canary measured around one pass.
type Canary struct {
	Pass     int     `json:"pass"`            // 1-based attempt number
	Stage    string  `json:"stage,omitempty"` // stage whose run the canary bracketed, if per stage
	Before   float64 `json:"before_ns"`       // Baseline/pingpong ns/op before the pass
	After    float64 `json:"after_ns"`        // and after it
	Rejected bool    `json:"rejected,omitempty"`
}

// Row is one benchmark of one stage, with every metric it reported.
type Row struct {
	Stage     string   `json:"stage"`     // stage directory, e.g. "stage1-ring"
	Benchmark string   `json:"benchmark"` // full name without "Benchmark" and the -N suffix, e.g. "FillStream/size=64B/depth=16"
	Metrics   []Metric `json:"metrics"`
}

// Metric is one unit of one row across the accepted passes.
type Metric struct {
	Unit   string    `json:"unit"`   // as go test prints it: "ns/op", "B/s", "cores", "p99-ns", ...
	Best   float64   `json:"best"`   // best pass (lowest, or highest for rates such as B/s and MB/s)
	Median float64   `json:"median"` // median of Values
	Values []float64 `json:"values"` // one per accepted pass, in pass order
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

// ErrSchema is returned by Load for a record of another schema version.
var ErrSchema = errors.New("records: unsupported schema version")

// Load reads and checks one record file.
func Load(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("records: %s: %w", path, err)
	}
	if rec.Schema != SchemaVersion {
		return nil, fmt.Errorf("%w: %s has schema %d, this tool reads %d", ErrSchema, path, rec.Schema, SchemaVersion)
	}
	if rec.Name == "" {
		return nil, fmt.Errorf("records: %s: no name", path)
	}
	return &rec, nil
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

// Save writes rec as indented JSON to path atomically: it writes a temporary
// file in the same directory and renames it, so an interrupted run never
// leaves a half-written record behind.
func Save(path string, rec *Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(data, '\n'))
}

// WriteFileAtomic writes data to path through a temporary file and a rename.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
