package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/records"
)

// CanaryBench selects the canary: the bare two-goroutine ping-pong every
// stage carries in BenchmarkBaseline. It is not stage code, so it measures
// the machine's mood, not the stage.
const (
	CanaryBench = "^BenchmarkBaseline$/^pingpong$"
	CanaryName  = "Baseline/pingpong"
)

// Bencher runs benchmarks of a stage; benchrun binaries in real use, a
// script in tests.
type Bencher interface {
	Bench(ctx context.Context, stage string, o benchrun.Options) (*benchfmt.Output, error)
}

// Config is what to measure and how strictly.
type Config struct {
	Stages          []string // in build order; the first one's binary also runs the canary
	Bench           string   // -test.bench for the passes
	Benchtime       string   // -test.benchtime for the passes
	Passes          int      // accepted passes wanted
	Threshold       float64  // reject a pass whose worst canary exceeds best × (1+Threshold)
	MaxRejects      int      // rejected passes re-run at most; one more rejection ends the run
	Strict          bool     // on giving up, fail instead of keeping the best passes available
	CanaryCount     int      // canary runs per measurement; their median is the canary
	CanaryBenchtime string   // -test.benchtime of a canary run
	Env             []string // KEY=VALUE for every benchmark process
	Progress        io.Writer
}

// Result is what Measure found.
type Result struct {
	Passes   []Pass           // the accepted passes, in the order they ran
	Canary   []records.Canary // one per attempt; Rejected marks the passes not used
	Rejected int              // attempts not used
	Note     string           // set when the gate gave up and kept what it had
}

// ErrGaveUp is returned, in strict mode, when too many passes were rejected.
var ErrGaveUp = errors.New("canary gate gave up")

// Measure runs passes until cfg.Passes of them pass the canary gate, or
// more than cfg.MaxRejects passes have been rejected. Odd attempts run the stages in
// build order and even attempts in reverse, so a slow drift over the run
// falls on every stage alike.
func Measure(ctx context.Context, cfg Config, b Bencher) (*Result, error) {
	if len(cfg.Stages) == 0 {
		return nil, errors.New("record: no stages to measure")
	}
	if cfg.Passes < 1 {
		return nil, fmt.Errorf("record: %d passes; want at least 1", cfg.Passes)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	eta := newEstimator(cfg.Stages)
	var canaries []records.Canary
	var attempts []Pass
	for {
		ok := Gate(canaries, cfg.Threshold)
		accepted := count(ok, true)
		if accepted >= cfg.Passes {
			return result(attempts, canaries, ok, ""), nil
		}
		if rejected := len(attempts) - accepted; rejected > cfg.MaxRejects {
			return giveUp(cfg, attempts, canaries, rejected)
		}

		attempt := len(attempts) + 1
		order := slices.Clone(cfg.Stages)
		if attempt%2 == 0 {
			slices.Reverse(order)
		}
		pass := Pass{Attempt: attempt}
		canary := records.Canary{Pass: attempt}
		left := cfg.Passes - accepted // passes still to run, this one included

		start := time.Now()
		before, err := measureCanary(ctx, cfg, b)
		if err != nil {
			return nil, err
		}
		eta.canary = time.Since(start)
		canary.Before = before
		for i, stage := range order {
			fmt.Fprintf(progress, "record: pass %d of %d (attempt %d): %s (%d/%d), canary %.0f ns, %s\n",
				accepted+1, cfg.Passes, attempt, stage, i+1, len(order), before, eta.left(order[i:], left-1))
			start := time.Now()
			out, err := b.Bench(ctx, stage, benchrun.Options{Bench: cfg.Bench, Benchtime: cfg.Benchtime, Env: cfg.Env})
			if err != nil {
				return nil, fmt.Errorf("record: stage %s, attempt %d: %w", stage, attempt, err)
			}
			eta.stage[stage] = time.Since(start)
			pass.Runs = append(pass.Runs, StageRun{Stage: stage, Output: out})
		}
		after, err := measureCanary(ctx, cfg, b)
		if err != nil {
			return nil, err
		}
		canary.After = after
		canaries = append(canaries, canary)
		attempts = append(attempts, pass)

		now := Gate(canaries, cfg.Threshold)
		verdict := "accepted"
		if !now[len(now)-1] {
			verdict = "rejected"
		}
		fmt.Fprintf(progress, "record: attempt %d: canary %.0f → %.0f ns (best %.0f, limit %.0f): %s\n",
			attempt, before, after, BestCanary(canaries), BestCanary(canaries)*(1+cfg.Threshold), verdict)
		for i := range now[:len(now)-1] {
			if ok[i] && !now[i] {
				fmt.Fprintf(progress, "record: attempt %d now rejected too: its canary %.0f ns is far from the new best\n", i+1, Worst(canaries[i]))
			}
		}
	}
}

// giveUp ends a run with too many rejections: in strict mode with an error,
// otherwise with the passes the gate accepted, fewer than wanted, or, if it
// accepted none, the one pass whose canary came closest to the best.
func giveUp(cfg Config, attempts []Pass, canaries []records.Canary, rejected int) (*Result, error) {
	best := BestCanary(canaries)
	if cfg.Strict {
		return nil, fmt.Errorf("record: %w: %d passes rejected (limit -max-rejects %d); best canary %.0f ns, allowed up to %.0f ns: the machine is too noisy now; try later or raise -threshold",
			ErrGaveUp, rejected, cfg.MaxRejects, best, best*(1+cfg.Threshold))
	}
	keep := Gate(canaries, cfg.Threshold)
	var note string
	if n := count(keep, true); n > 0 {
		note = fmt.Sprintf("The canary gate gave up after %d rejected passes (-max-rejects %d): this record holds %d accepted passes of the %d wanted.",
			rejected, cfg.MaxRejects, n, cfg.Passes)
	} else {
		closest := 0
		for i := range canaries {
			if Worst(canaries[i]) < Worst(canaries[closest]) {
				closest = i
			}
		}
		keep[closest] = true
		worst := Worst(canaries[closest])
		note = fmt.Sprintf("The canary gate gave up after %d rejected passes (-max-rejects %d) and accepted none: this record holds the one pass whose canary came closest to the best (%.0f ns against %.0f ns, %.0f%% over it; the threshold is %.0f%%).",
			rejected, cfg.MaxRejects, worst, best, 100*(worst/best-1), 100*cfg.Threshold)
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "record: warning: %s\n", note)
	}
	return result(attempts, canaries, keep, note), nil
}

func result(attempts []Pass, canaries []records.Canary, keep []bool, note string) *Result {
	r := &Result{Note: note}
	for i, p := range attempts {
		c := canaries[i]
		c.Rejected = !keep[i]
		r.Canary = append(r.Canary, c)
		if keep[i] {
			r.Passes = append(r.Passes, p)
		} else {
			r.Rejected++
		}
	}
	return r
}

// measureCanary runs the canary cfg.CanaryCount times in one process of the
// first stage's binary and returns the median ns/op.
func measureCanary(ctx context.Context, cfg Config, b Bencher) (float64, error) {
	stage := cfg.Stages[0]
	out, err := b.Bench(ctx, stage, benchrun.Options{Bench: CanaryBench, Benchtime: cfg.CanaryBenchtime, Count: cfg.CanaryCount, Env: cfg.Env})
	if err != nil {
		return 0, fmt.Errorf("record: canary (%s in %s): %w", CanaryName, stage, err)
	}
	var ns []float64
	for _, r := range out.Results() {
		if v, ok := r.Value("ns/op"); ok && r.Name == CanaryName {
			ns = append(ns, v)
		}
	}
	if len(ns) == 0 {
		return 0, fmt.Errorf("record: canary: %s reported no %s ns/op; every stage needs BenchmarkBaseline/pingpong", stage, CanaryName)
	}
	return Median(ns), nil
}

func count(bs []bool, want bool) int {
	n := 0
	for _, b := range bs {
		if b == want {
			n++
		}
	}
	return n
}
