package record

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
)

// fakeBencher plays a stage binary. Every stage has three rows:
// Baseline/pingpong (no canary: it opens no device), Fill/size=64B and
// H2D/mem=pinned/size=1MiB, which report the per-row canary when the
// environment holds SOFTGPU_CANARY=1. ns/op grows with each measuring run
// (surveys excepted), so a test can tell which run a kept value came from.
type fakeBencher struct {
	t *testing.T
	// rowCanary scripts the canary of each run of a row, by "stage name":
	// each run of the row (in a pass, or re-run alone) takes the next pair;
	// once the script runs out the canary is a steady 100 → 100.
	rowCanary map[string][][2]float64
	// On a re-run, report no result (drop) or no canary (noCanary).
	drop, noCanary bool
	// onlyLimits makes the survey find only the Baseline row, as a -bench
	// selecting only it would.
	onlyLimits bool

	calls []string // "survey STAGE", "canary", "STAGE", "rerun STAGE PATTERN", in order
	envs  [][]string
	runs  int // measuring runs so far
}

var fakeRows = []string{"Baseline/pingpong", "Fill/size=64B", "H2D/mem=pinned/size=1MiB"}

func (f *fakeBencher) Bench(ctx context.Context, stage string, o benchrun.Options) (*benchfmt.Output, error) {
	f.t.Helper()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "goos: linux\ngoarch: amd64\npkg: softgpu/%s\n", stage)
	rows := fakeRows
	rerun := false
	switch {
	case o.Bench == CanaryBench:
		f.calls = append(f.calls, "canary")
		for range max(o.Count, 1) {
			b.WriteString("BenchmarkBaseline/pingpong-2 1000 100 ns/op\n")
		}
		b.WriteString("PASS\n")
		return benchfmt.ParseString(b.String())
	case o.Benchtime == "1x":
		f.calls = append(f.calls, "survey "+stage)
		if f.onlyLimits {
			rows = fakeRows[:1]
		}
	case o.Bench == ".":
		f.calls = append(f.calls, stage)
		f.runs++
	default:
		f.calls = append(f.calls, "rerun "+stage+" "+o.Bench)
		f.runs++
		rerun = true
		i := slices.IndexFunc(fakeRows, func(name string) bool { return benchrun.Exactly(name) == o.Bench })
		if i < 0 {
			f.t.Fatalf("re-run pattern %q selects no single row", o.Bench)
		}
		rows = fakeRows[i : i+1]
		if f.drop {
			rows = nil
			b.WriteString("BenchmarkOther-2 1 1 ns/op\n")
		}
	}
	f.envs = append(f.envs, o.Env)
	canaries := slices.Contains(o.Env, CanaryEnv) && !(rerun && f.noCanary)
	n := float64(f.runs)
	for _, name := range rows {
		canary := ""
		if canaries && name != "Baseline/pingpong" && o.Benchtime != "1x" {
			c := [2]float64{100, 100}
			if script := f.rowCanary[stage+" "+name]; len(script) > 0 {
				c, f.rowCanary[stage+" "+name] = script[0], script[1:]
			}
			canary = fmt.Sprintf(" %g canary-before-ns %g canary-after-ns", c[0], c[1])
		}
		switch name {
		case "Baseline/pingpong":
			fmt.Fprintf(&b, "BenchmarkBaseline/pingpong-2 1000 %g ns/op\n", 100+n)
		case "Fill/size=64B":
			fmt.Fprintf(&b, "BenchmarkFill/size=64B-2 1000 %g ns/op%s %g cores\n", 1000+n, canary, 2-n/100)
		case "H2D/mem=pinned/size=1MiB":
			fmt.Fprintf(&b, "BenchmarkH2D/mem=pinned/size=1MiB-2 100 %g ns/op %g MB/s%s\n", 40000+n, 26000-n, canary)
		}
	}
	b.WriteString("PASS\n")
	return benchfmt.ParseString(b.String())
}
