// Command compare benchmarks two stages against each other and prints
// benchstat's comparison, the base stage in the first column and a
// "vs base" column for the other:
//
//	go run ./tools/cmd/compare stage1-ring                # its predecessor (stage0-mailbox) vs stage1-ring
//	go run ./tools/cmd/compare stage4-nolock stage5-vm    # stage4-nolock (base) vs stage5-vm
//	go run ./tools/cmd/compare -bench '^BenchmarkH2D$' -count 10 stage3-pinned
//
// The two stages run in alternating rounds (base, other; then other, base;
// -count rounds), so that drift on a noisy machine falls on both alike. The
// outputs are written with "pkg:" replaced by "stage: <dir>" and compared
// with `go tool benchstat -col stage`. See tools/README.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bench     = fs.String("bench", ".", "benchmarks to run, a -test.bench `regexp`")
		count     = fs.Int("count", 6, "rounds; each round runs every benchmark once in each stage")
		benchtime = fs.String("benchtime", "1s", "-test.benchtime of each benchmark")
		save      = fs.String("o", "", "also keep the benchstat-format input in `FILE`")
		env       cli.EnvFlag
	)
	fs.Var(&env, "env", "`KEY=VALUE` for every benchmark process (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./tools/cmd/compare [flags] STAGE [OTHER]\n\n")
		fmt.Fprintf(stderr, "With one stage, compares its predecessor in build order (base) with it.\nWith two, compares STAGE (base) with OTHER.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := cli.ParseFlags(fs, args); done {
		return code
	}
	usage := cli.Misuse(stderr, "compare")
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usage("want one or two stages, got %d arguments", fs.NArg())
	}
	if *count < 1 {
		return usage("-count %d: want at least 1", *count)
	}
	root, err := stages.Root()
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return cli.ExitFailed
	}
	base, other := "", fs.Arg(0)
	if fs.NArg() == 2 {
		base, other = fs.Arg(0), fs.Arg(1)
	} else if s, ok := stages.Lookup(other); ok {
		if s.Predecessor == "" {
			return usage("%s is the first stage in build order; name the stage to compare it with: compare %s OTHER", other, other)
		}
		base = s.Predecessor
	}
	for _, s := range []string{base, other} {
		if err := stages.CheckExists(root, s); err != nil {
			return usage("%v", err)
		}
	}
	if base == other {
		return usage("comparing %s with itself", base)
	}

	text, err := measure(ctx, root, base, other, *count, benchrun.Options{Bench: *bench, Benchtime: *benchtime, Env: env}, stderr)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "compare: interrupted\n")
		return cli.ExitInterrupted
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return cli.ExitFailed
	}
	input := *save
	if input == "" {
		dir, err := os.MkdirTemp("", "softgpu-compare-")
		if err != nil {
			fmt.Fprintf(stderr, "compare: %v\n", err)
			return cli.ExitFailed
		}
		defer os.RemoveAll(dir)
		input = filepath.Join(dir, base+"-vs-"+other+".txt")
	}
	if err := records.WriteFileAtomic(input, text); err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return cli.ExitFailed
	}
	if err := benchstat(ctx, root, input, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// measure builds both stages and runs them in alternating rounds, returning
// the benchstat input: every base output first, then every other output,
// so that benchstat's first column, the one compared against, is base.
func measure(ctx context.Context, root, base, other string, count int, o benchrun.Options, stderr io.Writer) ([]byte, error) {
	binDir, err := os.MkdirTemp("", "softgpu-compare-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	bins, err := benchrun.BuildAll(ctx, root, []string{base, other}, binDir, stderr)
	if err != nil {
		return nil, err
	}
	outputs := map[string][]*benchfmt.Output{}
	for round := 1; round <= count; round++ {
		order := []string{base, other}
		if round%2 == 0 {
			order = []string{other, base}
		}
		for _, stage := range order {
			fmt.Fprintf(stderr, "compare: round %d of %d: %s\n", round, count, stage)
			out, err := bins.Bench(ctx, stage, o)
			if err != nil {
				return nil, err
			}
			outputs[stage] = append(outputs[stage], out)
		}
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
	cmd := exec.CommandContext(ctx, "go", "tool", "benchstat", "-col", benchfmt.StageKey, input)
	cmd.Dir = filepath.Join(root, "tools")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool benchstat: %w", err)
	}
	return nil
}
