package record

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/records"
)

// Provenance is where and how a record was made.
type Provenance struct {
	Machine records.Machine
	Date    time.Time
	Commit  string // "" when unknown
	Command string // the exact command line
}

// NewRecord builds the record of a measured run.
func NewRecord(name string, cfg Config, res *Result, prov Provenance) *records.Record {
	rows, limits := Summarise(res.Passes, cfg.Stages)
	notes := []string{fmt.Sprintf("Canary: %s in %s's binary, the median of %d runs of -test.benchtime %s, measured before and after every pass; a pass is rejected when its slower canary exceeds the run's best by more than %.0f%%. Best is per metric over the accepted passes; bandwidth is in B/s (go test's MB/s × 10^6).",
		CanaryName, cfg.Stages[0], max(cfg.CanaryCount, 1), cfg.CanaryBenchtime, 100*cfg.Threshold)}
	if res.Note != "" {
		notes = append(notes, res.Note)
	}
	return &records.Record{
		Schema:  records.SchemaVersion,
		Name:    name,
		Machine: prov.Machine,
		Date:    prov.Date.Format(time.RFC3339),
		Commit:  prov.Commit,
		Command: prov.Command,
		Notes:   strings.Join(notes, "\n\n"),
		Settings: records.Settings{
			Stages:    cfg.Stages,
			Bench:     cfg.Bench,
			Benchtime: cfg.Benchtime,
			Passes:    cfg.Passes,
			Threshold: cfg.Threshold,
			Env:       cfg.Env,
		},
		Canary:   res.Canary,
		Rejected: res.Rejected,
		Limits:   limits,
		Rows:     rows,
	}
}

// Text returns the accepted passes in benchstat's format: every pass's raw
// configuration and result lines, stage after stage, with each "pkg:" line
// replaced by "stage: <dir>", so that
//
//	go tool benchstat -col stage NAME.txt
//
// puts the stages side by side, each pass a sample.
func Text(res *Result) ([]byte, error) {
	var b bytes.Buffer
	for _, p := range res.Passes {
		for _, run := range p.Runs {
			if err := benchfmt.WriteStage(&b, run.Output, run.Stage); err != nil {
				return nil, err
			}
		}
	}
	return b.Bytes(), nil
}

// Write saves rec as dir/NAME.json and text as dir/NAME.txt, each atomically
// (a temporary file renamed into place), the text first: a record never
// names a text file that is not there.
func Write(dir string, rec *records.Record, text []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	base := filepath.Join(dir, rec.Name)
	if err := records.WriteFileAtomic(base+".txt", text); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if err := records.Save(base+".json", rec); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}
