// Command compare benchmarks two stages against each other and prints
// benchstat's comparison, the base stage in the first column and a
// "vs base" column for the other:
//
//	go run ./tools/cmd/compare stage1-ring                # its predecessor (stage0-mailbox) vs stage1-ring
//	go run ./tools/cmd/compare stage4-nolock stage5-vm    # stage4-nolock (base) vs stage5-vm
//	go run ./tools/cmd/compare stage3-pinned -bench '^BenchmarkH2D$' -count 10
//
// The two stages run in alternating rounds (base, other; then other, base;
// -count rounds), so that drift on a noisy machine falls on both alike. The
// outputs are written with "pkg:" replaced by "stage: <dir>" and compared
// with `go tool benchstat -col stage`. Flags may come before or after the
// stages. Before the rounds it says how long they should take, and as they
// run, how long is left. See tools/README.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: go run ./tools/cmd/compare [flags] STAGE [OTHER] [flags]

With one stage, compares its predecessor in build order (base) with it.
With two, compares STAGE (base) with OTHER. Both are built once, then run in
-count alternating rounds; benchstat's table goes to stdout, progress and an
estimate of the time left to stderr. The default (6 rounds of -benchtime 1s)
takes about 12 minutes (stages 0 and 1) to 65 minutes (stages 8 and 9) for
two adjacent stages, derived from the stages record's pass times; it says
how long before the rounds start.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("compare", usage, stdout, stderr)
	var (
		bench     = c.Flags.String("bench", ".", "benchmarks to run, a -test.bench `regexp`")
		count     = c.Flags.Int("count", 6, "rounds; each round runs every benchmark once in each stage")
		benchtime = benchrun.MustBenchtime("1s")
		save      = c.Flags.String("o", "", "also keep the benchstat-format input in `FILE`")
		env       cli.EnvFlag
	)
	c.Flags.Var(&benchtime, "benchtime", "-test.benchtime of each benchmark: a `duration` (1s) or a count (100x)")
	c.Flags.Var(&env, "env", "`KEY=VALUE` for every benchmark process (repeatable)")
	names, code, done := c.Parse(args)
	if done {
		return code
	}
	if len(names) < 1 || len(names) > 2 {
		return c.Misuse("want one or two stages, got %d arguments %q", len(names), names)
	}
	if *count < 1 {
		return c.Misuse("-count %d: want at least 1", *count)
	}
	if _, err := regexp.Compile(*bench); err != nil {
		return c.Misuse("-bench %q: %v", *bench, err)
	}
	for _, name := range names {
		if err := stages.CheckKnown(name); err != nil {
			return c.Misuse("%v", err)
		}
	}
	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	base, other := "", names[len(names)-1]
	if len(names) == 2 {
		base = names[0]
	} else {
		s, _ := stages.Lookup(other)
		if s.Predecessor == "" {
			return c.Misuse("%s is the first stage in build order; name the stage to compare it with: compare %s OTHER", other, other)
		}
		base = s.Predecessor
	}
	for _, s := range []string{base, other} {
		if err := stages.CheckExists(root, s); err != nil {
			return c.Misuse("%v", err)
		}
	}
	if base == other {
		return c.Misuse("comparing %s with itself", base)
	}
	if *save != "" {
		if err := records.ProbeFile(*save); err != nil {
			return c.Misuse("-o %s: %v", *save, err)
		}
	}

	o := benchrun.Options{Bench: *bench, Benchtime: benchtime.String(), Env: env}
	text, err := measure(ctx, c, root, base, other, *count, o, benchtime)
	if ctx.Err() != nil {
		c.Printf("interrupted; nothing written")
		return cli.ExitInterrupted
	}
	if err != nil {
		return c.Fail(err)
	}
	input := *save
	if input == "" {
		dir, err := os.MkdirTemp("", "softgpu-compare-")
		if err != nil {
			return c.Fail(err)
		}
		defer os.RemoveAll(dir)
		input = filepath.Join(dir, base+"-vs-"+other+".txt")
	}
	if err := records.WriteFileAtomic(input, text); err != nil {
		return c.Fail(err)
	}
	if err := benchstat(ctx, root, input, stdout, stderr); err != nil {
		if ctx.Err() != nil {
			return cli.ExitInterrupted
		}
		return c.Fail(err)
	}
	return cli.ExitOK
}

// measure builds both stages, surveys them for an estimate, and runs them
// in alternating rounds, returning the benchstat input: every base output
// first, then every other output, so that benchstat's first column, the one
// compared against, is base.
func measure(ctx context.Context, c *cli.Command, root, base, other string, count int, o benchrun.Options, bt benchrun.Benchtime) ([]byte, error) {
	binDir, err := os.MkdirTemp("", "softgpu-compare-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	bins, err := benchrun.BuildAll(ctx, root, []string{base, other}, binDir, c.Printf)
	if err != nil {
		return nil, err
	}

	// The steps of the run, in order: count rounds of both stages.
	var steps []string
	for round := 1; round <= count; round++ {
		if round%2 == 1 {
			steps = append(steps, base, other)
		} else {
			steps = append(steps, other, base)
		}
	}
	c.Printf("surveying: every selected benchmark once in each stage, to count them and estimate the run")
	guess := map[string]time.Duration{}
	benchmarks := map[string]int{}
	for _, stage := range []string{base, other} {
		s, err := benchrun.SurveyStage(ctx, bins.Bench, stage, o)
		if err != nil {
			return nil, err
		}
		guess[stage], benchmarks[stage] = s.Estimate(bt), len(s.Names)
	}
	eta := benchrun.NewETA(guess)
	c.Printf("%s: %s, %s: %s; %d rounds of -benchtime %s: about %s",
		base, benchmarksOf(benchmarks[base]), other, benchmarksOf(benchmarks[other]), count, bt, benchrun.Approx(eta.Left(steps)))

	outputs := map[string][]*benchfmt.Output{}
	for i, stage := range steps {
		c.Printf("round %d of %d: %s (about %s left)", i/2+1, count, stage, benchrun.Approx(eta.Left(steps[i:])))
		start := time.Now()
		out, err := bins.Bench(ctx, stage, o)
		if err != nil {
			return nil, err
		}
		eta.Observe(stage, time.Since(start))
		outputs[stage] = append(outputs[stage], out)
	}
	var text bytes.Buffer
	for _, stage := range []string{base, other} {
		n := 0
		for _, out := range outputs[stage] {
			n += len(out.Results())
			if err := benchfmt.WriteStage(&text, out, stage); err != nil {
				return nil, err
			}
		}
		// benchstat exits 0 on empty input; check here instead.
		if n == 0 {
			return nil, fmt.Errorf("%s produced no benchmark results for -bench %q", stage, o.Bench)
		}
	}
	return text.Bytes(), nil
}

// benchstat runs the benchstat tool of the tools module on input. It runs
// in tools/ with GOWORK=off, so it works from anywhere in the repository
// even while a stage listed in go.work is half made.
func benchstat(ctx context.Context, root, input string, stdout, stderr io.Writer) error {
	fi, err := os.Stat(input)
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return fmt.Errorf("benchstat input %s is empty", input)
	}
	cmd := cli.ExecGroup(ctx, "go", "tool", "benchstat", "-col", benchfmt.StageKey, input)
	cmd.Dir = filepath.Join(root, "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool benchstat: %w", err)
	}
	return nil
}

func benchmarksOf(n int) string {
	if n == 1 {
		return "1 benchmark"
	}
	return fmt.Sprintf("%d benchmarks", n)
}
