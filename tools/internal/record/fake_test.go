package record

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
)

// fakeBencher answers canary runs from a script of canary values (one per
// measurement, repeated for every count) and stage runs with fixed output
// whose ns/op grows with each call, so passes differ.
type fakeBencher struct {
	t       *testing.T
	canary  []float64 // consumed one per canary measurement
	calls   []string  // "canary" or the stage, in call order
	stageNo int
}

func (f *fakeBencher) Bench(ctx context.Context, stage string, o benchrun.Options) (*benchfmt.Output, error) {
	f.t.Helper()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "goos: linux\ngoarch: amd64\npkg: softgpu/%s\n", stage)
	if o.Bench == CanaryBench {
		if len(f.canary) == 0 {
			f.t.Fatalf("canary script exhausted after calls %q", f.calls)
		}
		v := f.canary[0]
		f.canary = f.canary[1:]
		f.calls = append(f.calls, "canary")
		for range max(o.Count, 1) {
			fmt.Fprintf(&b, "BenchmarkBaseline/pingpong-2 1000 %g ns/op\n", v)
		}
	} else {
		f.stageNo++
		f.calls = append(f.calls, stage)
		n := float64(f.stageNo)
		fmt.Fprintf(&b, "BenchmarkBaseline/pingpong-2 1000 %g ns/op\n", 100+n)
		fmt.Fprintf(&b, "BenchmarkFill/size=64B-2 1000 %g ns/op %g cores\n", 1000+n, 2-n/100)
		fmt.Fprintf(&b, "BenchmarkH2D/mem=pinned/size=1MiB-2 100 %g ns/op %g MB/s\n", 40000+n, 26000-n)
	}
	b.WriteString("PASS\n")
	return benchfmt.ParseString(b.String())
}
