// Command compare benchmarks two stages against each other and prints
// benchstat's comparison, the base stage in the first column and a
// "vs base" column for the other:
//
//	go run ./tools/cmd/compare stage1-ring                # its predecessor (stage0-mailbox) vs stage1-ring
//	go run ./tools/cmd/compare stage4-nolock stage5-vm    # stage4-nolock (base) vs stage5-vm
//	go run ./tools/cmd/compare stage3-pinned -bench '^BenchmarkH2D$' -count 10
//	go run ./tools/cmd/compare -at 98b1309 stage1-ring    # stage1-ring at commit 98b1309 (base) vs the working tree's
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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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
       go run ./tools/cmd/compare -at REV [flags] STAGE [flags]

With one stage, compares its predecessor in build order (base) with it.
With two, compares STAGE (base) with OTHER. With -at, compares STAGE as
commit REV holds it (base) with STAGE in the working tree, both built as
modules on their own (GOWORK=off). Both are built once, then run in
-count alternating rounds; benchstat's table goes to stdout, progress and an
estimate of the time left to stderr. The default (6 rounds of -benchtime 1s)
takes about 14 minutes (stages 0 and 1) to 60 minutes (stages 8 and 9) for
two adjacent stages, derived from the passes .ci/durations -bench times; it says
how long before the rounds start.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("compare", usage, stdout, stderr)
	var (
		bench     = c.Flags.String("bench", ".", "benchmarks to run, a -test.bench `regexp`")
		count     = c.Flags.Int("count", 6, "rounds; each round runs every benchmark once in each stage")
		benchtime = benchrun.MustBenchtime("1s")
		save      = c.Flags.String("o", "", "also keep the benchstat-format input in `FILE`")
		at        = c.Flags.String("at", "", "compare STAGE at git commit `REV` (base) with STAGE in the working tree")
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
	if *at != "" && len(names) != 1 {
		return c.Misuse("-at %s compares one stage with itself at that commit; got %d stages %q", *at, len(names), names)
	}
	if *count < 1 {
		return c.Misuse("-count %d: want at least 1", *count)
	}
	if _, err := regexp.Compile(*bench); err != nil {
		return c.Misuse("-bench %q: %v", *bench, err)
	}
	for i, name := range names {
		if err := stages.CheckKnown(name); err != nil {
			return c.Misuse("%v", err)
		}
		names[i] = stages.Clean(name)
	}
	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	base, other := "", names[len(names)-1]
	var sides []side // base, then other
	if *at != "" {
		if err := stages.CheckExists(root, other); err != nil {
			return c.Misuse("%v", err)
		}
		committed, err := resolveAt(ctx, root, *at, other)
		if errors.Is(err, errAtUsage) {
			return c.Misuse("%v", strings.TrimPrefix(err.Error(), errAtUsage.Error()+": "))
		}
		if err != nil {
			return c.Fail(err)
		}
		base = committed.label(other)
		sides = []side{{label: base, stage: other, at: &committed}, {label: other, stage: other}}
	} else if len(names) == 2 {
		base = names[0]
	} else {
		s, _ := stages.Lookup(other)
		if s.Predecessor == "" {
			return c.Misuse("%s is the first stage in build order; name the stage to compare it with: compare %s OTHER", other, other)
		}
		base = s.Predecessor
	}
	if sides == nil {
		for _, s := range []string{base, other} {
			if err := stages.CheckExists(root, s); err != nil {
				return c.Misuse("%v", err)
			}
		}
		if base == other {
			return c.Misuse("comparing %s with itself", base)
		}
		sides = []side{{label: base, stage: base}, {label: other, stage: other}}
	}
	if *save != "" {
		if err := records.ProbeFile(*save); err != nil {
			return c.Misuse("-o %s: %v", *save, err)
		}
	}

	o := benchrun.Options{Bench: *bench, Benchtime: benchtime.String(), Env: env}
	text, err := measure(ctx, c, root, sides, *count, o, benchtime)
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

// side is one column of the comparison: a stage of the working tree, or
// one as a commit holds it (at).
type side struct {
	label string // the column's name: the stage, or stage@commit
	stage string
	at    *commitStage // nil: the working tree's
}

// measure builds both sides, surveys them for an estimate, and runs them
// in alternating rounds, returning the benchstat input: every base output
// first, then every other output, so that benchstat's first column, the one
// compared against, is base.
func measure(ctx context.Context, c *cli.Command, root string, sides []side, count int, o benchrun.Options, bt benchrun.Benchtime) ([]byte, error) {
	binDir, err := os.MkdirTemp("", "softgpu-compare-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	bins, err := build(ctx, c, root, binDir, sides)
	if err != nil {
		return nil, err
	}
	base, other := sides[0].label, sides[1].label

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

// build builds each side once. Stages of the working tree are built as
// compare always has, in the workspace. With a committed side, that side
// is first copied out of git, and both are built with GOWORK=off, each
// the module it is on its own ("every stage stands alone"), so that the
// two columns differ by the commits' code and nothing else: not by a
// dependency version the workspace would choose for one of them.
func build(ctx context.Context, c *cli.Command, root, binDir string, sides []side) (benchrun.Set, error) {
	committed := sides[0].at != nil
	if !committed {
		return benchrun.BuildAll(ctx, root, []string{sides[0].stage, sides[1].stage}, binDir, c.Printf)
	}
	set := benchrun.Set{}
	for i, s := range sides {
		dir := filepath.Join(root, s.stage)
		if s.at != nil {
			c.Printf("copying %s out of commit %s (git archive)", s.stage, s.at.short)
			var err error
			if dir, err = s.at.extract(ctx, root, s.stage, filepath.Join(binDir, "src")); err != nil {
				return nil, err
			}
		}
		c.Printf("building %s (go test -c, GOWORK=off)", s.label)
		out := filepath.Join(binDir, fmt.Sprint(i)) // both binaries are <stage>.test
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		bin, err := benchrun.BuildEnv(ctx, dir, out, "GOWORK=off")
		if err != nil {
			return nil, err
		}
		set[s.label] = bin
	}
	return set, nil
}

// benchstat runs the benchstat tool of the tools module on input. It runs
// in tools/ with GOWORK=off, so it works from anywhere in the repository
// even while a stage listed in go.work is half made; input is made
// absolute first, since a path relative to here means nothing in tools/.
func benchstat(ctx context.Context, root, input string, stdout, stderr io.Writer) error {
	input, err := filepath.Abs(input)
	if err != nil {
		return err
	}
	fi, err := os.Stat(input)
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return fmt.Errorf("benchstat input %s is empty", input)
	}
	var errOut strings.Builder
	cmd := cli.ExecGroup(ctx, "go", "tool", "benchstat", "-col", benchfmt.StageKey, input)
	cmd.Dir = filepath.Join(root, "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(stderr, &errOut)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool benchstat: %w", err)
	}
	return benchstatError(errOut.String())
}

// benchstatError returns the error benchstat reported on stderr, if any:
// benchstat prints "benchstat: <error>" and still exits 0 when it cannot
// open or parse its input. Its other stderr lines are warnings about single
// lines of the input, which do not fail it.
func benchstatError(stderr string) error {
	for _, line := range strings.Split(stderr, "\n") {
		if msg, ok := strings.CutPrefix(line, "benchstat: "); ok {
			return fmt.Errorf("go tool benchstat: %s", msg)
		}
	}
	return nil
}

func benchmarksOf(n int) string {
	if n == 1 {
		return "1 benchmark"
	}
	return fmt.Sprintf("%d benchmarks", n)
}
