package record

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/records"
)

// The pass-level canary: the bare two-goroutine ping-pong every stage
// carries in BenchmarkBaseline, run in its own process before and after
// each pass. It is not stage code, so it measures the machine, not the
// stage.
const (
	CanaryBench = "^BenchmarkBaseline$/^pingpong$"
	CanaryName  = "Baseline/pingpong"
)

// The per-row canary. With CanaryEnv set, every leaf benchmark that opens a
// device reports two extra metrics: a short bare ping-pong measured in the
// same process right before the device opens (CanaryBefore) and right after
// it closes (CanaryAfter), in ns per round trip. Measure takes them out of
// the row's metrics and keeps them beside it.
const (
	CanaryEnv    = "SOFTGPU_CANARY=1"
	CanaryBefore = "canary-before-ns"
	CanaryAfter  = "canary-after-ns"
)

// Bencher runs benchmarks of a stage; benchrun binaries in real use, a
// script in tests.
type Bencher interface {
	Bench(ctx context.Context, stage string, o benchrun.Options) (*benchfmt.Output, error)
}

// Config is what to measure and how.
type Config struct {
	Stages          []string // in build order; the first one's binary also runs the pass canary
	Bench           string   // -test.bench for the passes
	Benchtime       benchrun.Benchtime
	Passes          int     // passes to run
	CanaryTolerance float64 // a row is steady when max/min of its two canaries is at most this (>= 1)
	MaxReruns       int     // re-runs of one row in one pass at most
	CanaryCount     int     // pass canary: runs per measurement; their median is the canary
	CanaryBenchtime benchrun.Benchtime
	Env             []string // KEY=VALUE for every benchmark process, after CanaryEnv
	// Progress, if not nil, receives progress lines (Printf-like, no
	// newline).
	Progress func(format string, a ...any)
}

// StageRun is one stage's benchmark output within a pass, as kept: a
// re-run row's kept result in place of its first one, canary metrics taken
// out, and what happened to each row.
type StageRun struct {
	Stage  string
	Output *benchfmt.Output
	Rows   map[string]RowRun // by benchmark name
}

// RowRun is what happened to one row in one pass.
type RowRun struct {
	HasCanary bool              // the row reported both canary metrics
	Canary    records.RowCanary // of the kept run
	Reruns    int               // re-runs in this pass
	Unsteady  bool              // no run in this pass kept the canary within tolerance
}

// Pass is one run of every chosen stage.
type Pass struct {
	Number int        // 1-based
	Runs   []StageRun // in the order the stages ran
}

// Result is what Measure found.
type Result struct {
	Passes []Pass
	Canary []records.Canary // the pass canary, one per pass
	Reruns int              // row re-runs in all
}

// Measure runs cfg.Passes passes of every stage. Odd passes run the stages
// in build order and even passes in reverse, so a slow drift over the run
// falls on every stage alike. Each row's own canary decides whether it is
// re-run (rerunRow); no pass is ever thrown away.
func Measure(ctx context.Context, cfg Config, b Bencher) (*Result, error) {
	switch {
	case len(cfg.Stages) == 0:
		return nil, errors.New("no stages to measure")
	case cfg.Passes < 1:
		return nil, fmt.Errorf("%d passes; want at least 1", cfg.Passes)
	case !(cfg.CanaryTolerance >= 1) || math.IsInf(cfg.CanaryTolerance, 1): // NaN too; JSON has neither
		return nil, fmt.Errorf("canary tolerance %v; want a finite 1 or more (a ratio of the slower canary to the faster)", cfg.CanaryTolerance)
	}
	say := cfg.Progress
	if say == nil {
		say = func(string, ...any) {}
	}
	o := benchrun.Options{Bench: cfg.Bench, Benchtime: cfg.Benchtime.String(), Env: append([]string{CanaryEnv}, cfg.Env...)}

	// The steps of the run, in order, for the estimate.
	const canaryStep = "(canary)"
	var steps []string
	for pass := 1; pass <= cfg.Passes; pass++ {
		steps = append(append(append(steps, canaryStep), passOrder(cfg.Stages, pass)...), canaryStep)
	}
	say("surveying: every selected benchmark once in each stage, to count them and estimate the run")
	guess := map[string]time.Duration{}
	leaves, rows := 0, 0
	for _, stage := range cfg.Stages {
		s, err := benchrun.SurveyStage(ctx, b.Bench, stage, o)
		if err != nil {
			return nil, fmt.Errorf("surveying %s: %w", stage, err)
		}
		guess[stage] = s.Estimate(cfg.Benchtime)
		leaves += len(s.Names)
		for _, name := range s.Names {
			if family, _, _ := strings.Cut(name, "/"); family != LimitsFamily {
				rows++
			}
		}
	}
	if leaves > 0 && rows == 0 {
		// Found now, not when the record without rows is refused at the end.
		return nil, fmt.Errorf("-bench %q selects only %s benchmarks, which a record keeps as limits, not rows; select at least one other", cfg.Bench, LimitsFamily)
	}
	eta := benchrun.NewETA(guess)
	start := time.Now()
	before, err := measureCanary(ctx, cfg, b)
	if err != nil {
		return nil, err
	}
	eta.Observe(canaryStep, time.Since(start))
	say("%d %s, %d benchmarks, %d passes of -benchtime %s: about %s, plus any re-runs",
		len(cfg.Stages), plural(len(cfg.Stages), "stage", "stages"), leaves, cfg.Passes, cfg.Benchtime, benchrun.Approx(eta.Left(steps[1:])))

	res := &Result{}
	step := 1 // steps[0], the first canary, is done
	for pass := 1; pass <= cfg.Passes; pass++ {
		if pass > 1 {
			start := time.Now()
			if before, err = measureCanary(ctx, cfg, b); err != nil {
				return nil, err
			}
			eta.Observe(canaryStep, time.Since(start))
			step++
		}
		p := Pass{Number: pass}
		rerunsBefore := res.Reruns
		order := passOrder(cfg.Stages, pass)
		for i, stage := range order {
			say("pass %d of %d: %s (%d/%d), canary %.0f ns, about %s left",
				pass, cfg.Passes, stage, i+1, len(order), before, benchrun.Approx(eta.Left(steps[step:])))
			start := time.Now()
			run, reruns, err := runStage(ctx, cfg, b, stage, pass, o, say)
			if err != nil {
				return nil, fmt.Errorf("stage %s, pass %d: %w", stage, pass, err)
			}
			eta.Observe(stage, time.Since(start))
			step++
			res.Reruns += reruns
			p.Runs = append(p.Runs, run)
		}
		start := time.Now()
		after, err := measureCanary(ctx, cfg, b)
		if err != nil {
			return nil, err
		}
		eta.Observe(canaryStep, time.Since(start))
		step++
		res.Canary = append(res.Canary, records.Canary{Pass: pass, Before: before, After: after})
		res.Passes = append(res.Passes, p)
		say("pass %d of %d done: pass canary %.0f → %.0f ns, %s", pass, cfg.Passes, before, after, rerunCount(res.Reruns-rerunsBefore))
	}
	return res, nil
}

// passOrder is the order of the stages in pass: build order for odd
// passes, reversed for even ones.
func passOrder(stages []string, pass int) []string {
	order := slices.Clone(stages)
	if pass%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

// runStage runs one stage's benchmarks once, re-running each row whose
// canary moved, and returns the run as kept and the number of re-runs.
func runStage(ctx context.Context, cfg Config, b Bencher, stage string, pass int, o benchrun.Options, say func(string, ...any)) (StageRun, int, error) {
	out, err := b.Bench(ctx, stage, o)
	if err != nil {
		return StageRun{}, 0, err
	}
	run := StageRun{Stage: stage, Output: &benchfmt.Output{}, Rows: map[string]RowRun{}}
	reruns := 0
	for _, line := range out.Lines {
		if line.Kind != benchfmt.Result {
			run.Output.Lines = append(run.Output.Lines, line)
			continue
		}
		kept, canary, ok := takeCanary(line)
		row := RowRun{HasCanary: ok, Canary: canary}
		row.Canary.Pass = pass
		if ok && !canary.Steady(cfg.CanaryTolerance) {
			if kept, row, err = rerunRow(ctx, cfg, b, stage, pass, o, kept, row, say); err != nil {
				return StageRun{}, 0, err
			}
			reruns += row.Reruns
		}
		run.Rows[kept.Bench.Name] = row
		run.Output.Lines = append(run.Output.Lines, kept)
	}
	return run, reruns, nil
}

// rerunRow runs the row of line alone (a pattern that selects that leaf and
// nothing else) until its canary holds within tolerance, at most
// cfg.MaxReruns times. It keeps the first steady run; if no run was
// steady, the steadiest of all, original included, with the row marked
// unsteady. A row whose own canary moved is never kept while a steady run
// of it exists.
func rerunRow(ctx context.Context, cfg Config, b Bencher, stage string, pass int, o benchrun.Options, line benchfmt.Line, row RowRun, say func(string, ...any)) (benchfmt.Line, RowRun, error) {
	name := line.Bench.Name
	o.Bench = benchrun.Exactly(name)
	for row.Reruns < cfg.MaxReruns {
		row.Reruns++
		say("pass %d, %s %s: canary moved %.0f → %.0f ns (×%.2f, tolerance ×%g): re-run %d of %d",
			pass, stage, name, row.Canary.Before, row.Canary.After, row.Canary.Ratio(), cfg.CanaryTolerance, row.Reruns, cfg.MaxReruns)
		out, err := b.Bench(ctx, stage, o)
		if err != nil {
			return line, row, fmt.Errorf("re-running %s: %w", name, err)
		}
		i := slices.IndexFunc(out.Lines, func(l benchfmt.Line) bool { return l.Kind == benchfmt.Result && l.Bench.Name == name })
		if i < 0 {
			return line, row, fmt.Errorf("re-running %s (-test.bench %s) gave no result for it", name, o.Bench)
		}
		again, canary, ok := takeCanary(out.Lines[i])
		if !ok {
			return line, row, fmt.Errorf("re-running %s gave no %s and %s, though its first run did", name, CanaryBefore, CanaryAfter)
		}
		canary.Pass = pass
		if canary.Ratio() < row.Canary.Ratio() {
			line, row.Canary = again, canary
		}
		if row.Canary.Steady(cfg.CanaryTolerance) {
			return line, row, nil
		}
	}
	row.Unsteady = true
	say("pass %d, %s %s: unsteady: no run held the canary within ×%g in %d %s; keeping the steadiest (%.0f → %.0f ns)",
		pass, stage, name, cfg.CanaryTolerance, row.Reruns, plural(row.Reruns, "re-run", "re-runs"), row.Canary.Before, row.Canary.After)
	return line, row, nil
}

// takeCanary takes the per-row canary metrics out of a result line. ok is
// true when the line reported both.
func takeCanary(line benchfmt.Line) (benchfmt.Line, records.RowCanary, bool) {
	line, taken := line.Without(CanaryBefore, CanaryAfter)
	var c records.RowCanary
	var before, after bool
	for _, v := range taken {
		switch v.Unit {
		case CanaryBefore:
			c.Before, before = v.Value, true
		case CanaryAfter:
			c.After, after = v.Value, true
		}
	}
	return line, c, before && after
}

// measureCanary runs the pass canary cfg.CanaryCount times in one process
// of the first stage's binary and returns the median ns/op.
func measureCanary(ctx context.Context, cfg Config, b Bencher) (float64, error) {
	stage := cfg.Stages[0]
	out, err := b.Bench(ctx, stage, benchrun.Options{Bench: CanaryBench, Benchtime: cfg.CanaryBenchtime.String(), Count: cfg.CanaryCount, Env: cfg.Env})
	if err != nil {
		return 0, fmt.Errorf("canary (%s in %s): %w", CanaryName, stage, err)
	}
	var ns []float64
	for _, r := range out.Results() {
		if v, ok := r.Value("ns/op"); ok && r.Name == CanaryName {
			ns = append(ns, v)
		}
	}
	if len(ns) == 0 {
		return 0, fmt.Errorf("canary: %s reported no %s ns/op; every stage needs BenchmarkBaseline/pingpong", stage, CanaryName)
	}
	return records.Median(ns), nil
}

// rerunCount says how many row re-runs there were.
func rerunCount(n int) string {
	if n == 0 {
		return "no row re-run"
	}
	return fmt.Sprintf("%d row %s", n, plural(n, "re-run", "re-runs"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
