package record

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/records"
)

func testConfig(stages ...string) Config {
	return Config{
		Stages: stages, Bench: ".", Benchtime: benchrun.MustBenchtime("1ms"), Passes: 2,
		CanaryTolerance: 1.3, MaxReruns: 3, CanaryCount: 3, CanaryBenchtime: benchrun.MustBenchtime("10x"),
	}
}

// TestMeasureSteady checks the order of a run with no row to re-run:
// surveys, then passes bracketed by the pass canary, alternating the stage
// order; every benchmark run asks for the per-row canary, the user's -env
// after it; the canary metrics leave the output and land beside each row.
func TestMeasureSteady(t *testing.T) {
	cfg := testConfig("stage0-mailbox", "stage1-ring")
	cfg.Env = []string{"SOFTGPU_IDLE=spin"}
	fake := &fakeBencher{t: t}
	res, err := Measure(context.Background(), cfg, fake)
	require.NoError(t, err)
	want := []string{
		"survey stage0-mailbox", "survey stage1-ring",
		"canary", "stage0-mailbox", "stage1-ring", "canary",
		"canary", "stage1-ring", "stage0-mailbox", "canary",
	}
	assert.Equal(t, want, fake.calls, "Measure() ran %q", fake.calls)
	for _, env := range fake.envs {
		assert.Equal(t, []string{CanaryEnv, "SOFTGPU_IDLE=spin"}, env, "a benchmark ran with env %q; want %q, then -env", env, CanaryEnv)
	}
	if len(res.Passes) != 2 || len(res.Canary) != 2 || res.Reruns != 0 {
		t.Fatalf("Measure() = %d passes, %d pass canaries, %d re-runs; want 2, 2, 0", len(res.Passes), len(res.Canary), res.Reruns)
	}
	for _, p := range res.Passes {
		for _, run := range p.Runs {
			assert.Equal(t, (RowRun{HasCanary: true, Canary: records.RowCanary{Pass: p.Number, Before: 100, After: 100}}), run.Rows["Fill/size=64B"], "pass %d %s Fill row", p.Number, run.Stage)
			if got := run.Rows["Baseline/pingpong"]; got.HasCanary {
				t.Errorf("pass %d %s Baseline row has a canary: %+v", p.Number, run.Stage, got)
			}
		}
	}
	text, err := Text(res)
	require.NoError(t, err)
	if strings.Contains(string(text), "canary") || strings.Count(string(text), "BenchmarkFill/size=64B-2\t1000\t") != 4 {
		t.Errorf("Text() should hold 4 Fill lines and no canary metric:\n%s", text)
	}
}

func TestMeasureReruns(t *testing.T) {
	const fill = "stage0-mailbox Fill/size=64B"
	tests := []struct {
		name         string
		script       [][2]float64 // the canaries of Fill's runs in stage0-mailbox
		maxReruns    int
		wantReruns   int
		wantUnsteady bool
		wantCanary   [2]float64
		wantNs       string // the kept ns/op, which says which run it came from
	}{
		{"steady at the tolerance", [][2]float64{{100, 130}}, 3, 0, false, [2]float64{100, 130}, "1001"},
		{"moved, steady on the first re-run", [][2]float64{{55, 330}, {110, 112}}, 3, 1, false, [2]float64{110, 112}, "1002"},
		{"moved twice, then steady", [][2]float64{{330, 55}, {110, 330}, {60, 55}}, 3, 2, false, [2]float64{60, 55}, "1003"},
		{"never steady: the steadiest kept, row unsteady", [][2]float64{{55, 330}, {110, 330}, {100, 200}, {330, 55}}, 3, 3, true, [2]float64{100, 200}, "1003"},
		{"never steady: the first run was the steadiest", [][2]float64{{100, 150}, {100, 400}, {100, 400}, {100, 400}}, 3, 3, true, [2]float64{100, 150}, "1001"},
		{"no re-runs allowed", [][2]float64{{55, 330}}, 0, 0, true, [2]float64{55, 330}, "1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("stage0-mailbox", "stage1-ring")
			cfg.Passes, cfg.MaxReruns = 1, tt.maxReruns
			fake := &fakeBencher{t: t, rowCanary: map[string][][2]float64{fill: tt.script}}
			res, err := Measure(context.Background(), cfg, fake)
			require.NoError(t, err)
			row := res.Passes[0].Runs[0].Rows["Fill/size=64B"]
			want := RowRun{HasCanary: true, Reruns: tt.wantReruns, Unsteady: tt.wantUnsteady,
				Canary: records.RowCanary{Pass: 1, Before: tt.wantCanary[0], After: tt.wantCanary[1]}}
			assert.Equal(t, want, row, "Fill row")
			assert.Equal(t, tt.wantReruns, res.Reruns, "Result.Reruns")
			rerun := "rerun stage0-mailbox ^BenchmarkFill$/^size=64B$"
			if n := count(fake.calls, rerun); n != tt.wantReruns {
				t.Errorf("%q ran %d times; want %d (calls %q)", rerun, n, tt.wantReruns, fake.calls)
			}
			// The re-runs come right after the stage's own run, before the next stage.
			if i := slices.Index(fake.calls, "stage1-ring"); tt.wantReruns > 0 && slices.Index(fake.calls, rerun) > i {
				t.Errorf("re-runs came after the next stage: %q", fake.calls)
			}
			text, err := Text(res)
			require.NoError(t, err)
			if want := fmt.Sprintf("BenchmarkFill/size=64B-2\t1000\t%s ns/op", tt.wantNs); !strings.Contains(string(text), want) ||
				strings.Count(string(text), "BenchmarkFill/size=64B-2") != 2 {
				t.Errorf("Text() should keep one Fill line per stage, stage0-mailbox's being %q:\n%s", want, text)
			}
		})
	}
}

func TestMeasureErrors(t *testing.T) {
	moved := func() map[string][][2]float64 {
		return map[string][][2]float64{"stage0-mailbox Fill/size=64B": {{55, 330}}}
	}
	tests := []struct {
		name  string
		fake  *fakeBencher
		ctx   func() context.Context
		cfg   func(*Config)
		want  string
		errIs error
	}{
		{name: "re-run gives no result", fake: &fakeBencher{rowCanary: moved(), drop: true},
			want: "stage stage0-mailbox, pass 1: re-running Fill/size=64B (-test.bench ^BenchmarkFill$/^size=64B$) gave no result for it"},
		{name: "re-run gives no canary", fake: &fakeBencher{rowCanary: moved(), noCanary: true},
			want: "re-running Fill/size=64B gave no canary-before-ns and canary-after-ns, though its first run did"},
		{name: "cancelled", fake: &fakeBencher{}, errIs: context.Canceled,
			ctx: func() context.Context { ctx, cancel := context.WithCancel(context.Background()); cancel(); return ctx }},
		{name: "tolerance below 1", fake: &fakeBencher{}, cfg: func(c *Config) { c.CanaryTolerance = 0.5 }, want: "canary tolerance 0.5; want a finite 1 or more"},
		{name: "tolerance NaN", fake: &fakeBencher{}, cfg: func(c *Config) { c.CanaryTolerance = math.NaN() }, want: "canary tolerance NaN; want a finite 1 or more"},
		{name: "tolerance Inf", fake: &fakeBencher{}, cfg: func(c *Config) { c.CanaryTolerance = math.Inf(1) }, want: "canary tolerance +Inf; want a finite 1 or more"},
		{name: "no stages", fake: &fakeBencher{}, cfg: func(c *Config) { c.Stages = nil }, want: "no stages to measure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fake.t = t
			cfg := testConfig("stage0-mailbox")
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			_, err := Measure(ctx, cfg, tt.fake)
			if err == nil || tt.errIs != nil && !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Measure() error = %v; want %v %q", err, tt.errIs, tt.want)
			}
		})
	}
}

// TestMeasureOnlyLimits checks a -bench that selects only Baseline
// benchmarks, which go to a record's limits and leave it no rows, is
// refused right after the survey, before any pass.
func TestMeasureOnlyLimits(t *testing.T) {
	fake := &fakeBencher{t: t, onlyLimits: true}
	cfg := testConfig("stage0-mailbox", "stage1-ring")
	cfg.Bench = "Baseline"
	_, err := Measure(context.Background(), cfg, fake)
	want := `-bench "Baseline" selects only Baseline benchmarks, which a record keeps as limits, not rows; select at least one other`
	if err == nil || err.Error() != want {
		t.Errorf("Measure(only Baseline) error = %v; want %q", err, want)
	}
	if want := []string{"survey stage0-mailbox", "survey stage1-ring"}; !slices.Equal(fake.calls, want) {
		t.Errorf("Measure(only Baseline) ran %q; want only %q", fake.calls, want)
	}
}

func TestMeasureProgress(t *testing.T) {
	var progress strings.Builder
	cfg := testConfig("stage0-mailbox", "stage1-ring")
	cfg.MaxReruns = 1
	cfg.Progress = func(format string, a ...any) { fmt.Fprintf(&progress, format+"\n", a...) }
	fake := &fakeBencher{t: t, rowCanary: map[string][][2]float64{"stage1-ring H2D/mem=pinned/size=1MiB": {{55, 330}, {330, 55}}}}
	_, err := Measure(context.Background(), cfg, fake)
	require.NoError(t, err)
	for _, want := range []string{
		"surveying: every selected benchmark once in each stage",
		"2 stages, 6 benchmarks, 2 passes of -benchtime 1ms: about ",
		", plus any re-runs",
		"pass 1 of 2: stage0-mailbox (1/2), canary 100 ns, about ",
		"pass 2 of 2: stage0-mailbox (2/2), canary 100 ns, about ",
		"pass 1, stage1-ring H2D/mem=pinned/size=1MiB: canary moved 55 → 330 ns (×6.00, tolerance ×1.3): re-run 1 of 1",
		"pass 1, stage1-ring H2D/mem=pinned/size=1MiB: unsteady: no run held the canary within ×1.3 in 1 re-run; keeping the steadiest (55 → 330 ns)",
		"pass 1 of 2 done: pass canary 100 → 100 ns, 1 row re-run",
		"pass 2 of 2 done: pass canary 100 → 100 ns, no row re-run",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not mention %q:\n%s", want, progress.String())
		}
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
