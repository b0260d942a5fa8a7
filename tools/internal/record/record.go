// Package record measures stages for the book: it runs each chosen stage's
// benchmarks in several passes, checks every row against the canary
// measured in the row's own process, re-runs the rows whose canary moved,
// and reduces the passes to a records.Record (best, median, min and max per
// metric, each row's canary per pass) and a benchstat-format text beside it.
//
// The flow of one run (Measure):
//
//	survey: every selected benchmark once (1x) per stage, for the estimate
//	for each pass (odd passes in build order, even passes reversed):
//	    pass canary (Baseline/pingpong in its own process; informational)
//	    for each stage: run its benchmarks with SOFTGPU_CANARY=1;
//	        each row reports canary-before-ns and canary-after-ns;
//	        a row whose two canaries differ by more than the tolerance
//	        (max/min) is re-run alone, up to MaxReruns times
//	    pass canary again
//
// Why per row (DESIGN.md §6): this machine's vCPUs move between placement
// clusters (a bare ping-pong reads about 55, 110 or 330 ns and can change
// within seconds). A pass-level gate against the run's best canary rejected
// most passes and still let through rows measured across a move. The canary
// measured right before and after a row, in the same process, says whether
// that row ran in one placement; a row that did not is measured again.
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
	Commit  string // full HEAD hash; "" when unknown
	Dirty   bool   // the tree had uncommitted changes (-allow-dirty)
	Command string // the exact command line
}

// NewRecord builds the record of a measured run.
func NewRecord(name string, cfg Config, res *Result, prov Provenance) *records.Record {
	rows, limits := Summarise(res.Passes, cfg.Stages)
	rerun := 0
	for _, r := range append(rows[:len(rows):len(rows)], limits...) {
		if r.Reruns > 0 {
			rerun++
		}
	}
	notes := fmt.Sprintf("Every benchmark process ran with %s: each row that opens a device measured a bare ping-pong (the canary) "+
		"right before opening it and right after closing it. A row whose two canaries differed by more than ×%g (max/min) was re-run alone, "+
		"up to %d times; the first steady run was kept, or, if none was steady, the steadiest, and the row marked unsteady. "+
		"%d passes; per metric the best, the median (the lower middle value: always an observed one), min and max; bandwidth in B/s (go test's MB/s × 10^6). "+
		"The record's own canary list is %s in %s's binary, the median of %d runs of -test.benchtime %s, before and after each pass: it shows the drift and rejects nothing.",
		CanaryEnv, cfg.CanaryTolerance, cfg.MaxReruns, cfg.Passes, CanaryName, cfg.Stages[0], max(cfg.CanaryCount, 1), cfg.CanaryBenchtime)
	return &records.Record{
		Schema:  records.SchemaVersion,
		Name:    name,
		Machine: prov.Machine,
		Date:    prov.Date.Format(time.RFC3339),
		Commit:  prov.Commit,
		Dirty:   prov.Dirty,
		Command: prov.Command,
		Notes:   notes,
		Settings: records.Settings{
			Stages:          cfg.Stages,
			Bench:           cfg.Bench,
			Benchtime:       cfg.Benchtime.String(),
			Passes:          cfg.Passes,
			CanaryTolerance: cfg.CanaryTolerance,
			MaxReruns:       cfg.MaxReruns,
			Env:             cfg.Env,
		},
		Canary:    res.Canary,
		RowsRerun: rerun,
		Limits:    limits,
		Rows:      rows,
	}
}

// Text returns the passes in benchstat's format: every pass's configuration
// and result lines (a re-run row's kept line in place of the first one, the
// canary metrics taken out), stage after stage, with each "pkg:" line
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

// Paths returns the two files of record name in dir.
func Paths(dir, name string) (jsonPath, textPath string) {
	base := filepath.Join(dir, name)
	return base + ".json", base + ".txt"
}

// Write saves rec as dir/NAME.json and text as dir/NAME.txt, as a pair:
// both are written in full to temporary files first, then renamed into
// place, and a failure leaves neither new file behind (records.WriteFiles).
// Both get mode 0644.
func Write(dir string, rec *records.Record, text []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := records.Marshal(rec)
	if err != nil {
		return err
	}
	jsonPath, textPath := Paths(dir, rec.Name)
	return records.WriteFiles(records.File{Path: textPath, Data: text}, records.File{Path: jsonPath, Data: data})
}

// ValidName reports whether name can name a record: a plain file name,
// without the .json or .txt the record's files add (smoke.json would be
// written as smoke.json.json).
func ValidName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".") &&
		!strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, ".txt")
}
