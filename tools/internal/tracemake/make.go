// Package tracemake is `trace make`: it runs one benchmark of one stage
// with SOFTGPU_TRACE set, checks the trace the stage wrote, and commits it
// to the book's traces with its provenance:
//
//	<root>/STAGE: go test -run '^$' -bench REGEXP -benchtime T .   (SOFTGPU_TRACE=<temp>/trace.json)
//	  ──trace.Parse──▶ valid? ──▶ OUT/NAME.json       the bytes the stage wrote
//	                              OUT/NAME.meta.json  trace.Meta: command, stage, commit, date, machine
//
// Every device writes its trace when it closes and the last one wins, so
// -bench should match one leaf benchmark; when several ran, make says so
// and lists them in the meta file. It refuses a work tree with uncommitted
// changes (the commit would not name the code that made the trace) unless
// -allow-dirty, which records the commit with "+dirty". Nothing is written
// unless the trace is valid; an invalid one is kept in its temporary
// directory for inspection.
//
// It is a package of its own, not a file of cmd/trace, because two
// commands run it: trace (as its make sub-command) and record -retake,
// which re-makes every trace of the book in its own process, as it
// re-takes every record.
package tracemake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/record"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
	"softgpu/tools/internal/trace"
)

// traceEnv is the variable that makes a stage's devices write their trace.
const traceEnv = "SOFTGPU_TRACE"

// Make is the make sub-command, as the trace command lists it.
var Make = cli.Subcommand{Name: "make", Usage: `usage: go run ./tools/cmd/trace make -stage STAGE -bench REGEXP -name NAME [flags]

Runs go test -run '^$' -bench REGEXP -benchtime T . in the stage's directory
with SOFTGPU_TRACE set, checks the trace the stage wrote, and writes it to
book/traces/NAME.json with NAME.meta.json (command, stage, commit, date,
machine). Every device writes its trace when it closes and the last one
wins: make REGEXP match one leaf benchmark, such as
'^BenchmarkGap/idle=sleep/gap=100us$'. A work tree with uncommitted changes
is refused unless -allow-dirty. The command the meta keeps is this one
without -out, the one a reader re-runs.
`, Run: makeTrace}

// Command is how every trace's command starts, as NAME.meta.json keeps it.
const Command = "go run ./tools/cmd/trace make"

func makeTrace(ctx context.Context, c *cli.Command, args []string) int {
	var (
		stage      = c.Flags.String("stage", "", "the stage `directory` whose benchmark runs (required)")
		bench      = c.Flags.String("bench", "", "the -bench `regexp` (required); match one leaf benchmark: the last device to close writes the trace")
		benchtime  = benchrun.MustBenchtime("20x")
		name       = c.Flags.String("name", "", "writes `NAME`.json and NAME.meta.json (required)")
		out        = c.Flags.String("out", "", "`directory` to write into (default: book/traces under the repository root)")
		allowDirty = c.Flags.Bool("allow-dirty", false, "write even if the work tree has uncommitted changes (the commit is recorded with +dirty)")
		env        cli.EnvFlag
	)
	c.Flags.Var(&benchtime, "benchtime", "the -benchtime: a `duration` (1s) or a count (100x)")
	c.Flags.Var(&env, "env", "`KEY=VALUE` in the benchmark's environment (repeatable)")
	rest, code, done := c.Parse(args)
	if done {
		return code
	}
	switch {
	case len(rest) > 0:
		return c.Misuse("unexpected arguments %q; make takes only flags", rest)
	case *stage == "":
		return c.Misuse("-stage is required: the stage whose benchmark runs")
	case *bench == "":
		return c.Misuse("-bench is required: a regexp matching one leaf benchmark, e.g. '^BenchmarkGap/idle=sleep/gap=100us$'")
	case *name == "":
		return c.Misuse("-name is required: the trace is written to NAME.json and NAME.meta.json")
	case strings.ContainsAny(*name, `/\`) || strings.HasPrefix(*name, ".") || strings.HasSuffix(*name, ".json"):
		return c.Misuse("-name %q must be a plain file name, without directories, a leading dot or .json", *name)
	}
	if _, err := regexp.Compile(*bench); err != nil {
		return c.Misuse("-bench %q: %v", *bench, err)
	}
	for _, kv := range env {
		if key, _, _ := strings.Cut(kv, "="); key == traceEnv {
			return c.Misuse("-env %s: make sets %s itself", kv, traceEnv)
		}
	}

	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	if err := stages.CheckExists(root, *stage); err != nil {
		return c.Misuse("%v", err)
	}
	*stage = stages.Clean(*stage)
	dir := *out
	if dir == "" {
		dir = filepath.Join(root, "book", "traces")
	}
	if err := records.ProbeDir(dir); err != nil {
		return c.Misuse("-out %s: %v", dir, err)
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			c.Printf("interrupted; nothing written")
			return cli.ExitInterrupted
		}
		return c.Fail(err)
	}

	// The commit, checked before the run rather than after it.
	commit := record.Commit(ctx, root)
	switch {
	case commit == "" && !*allowDirty:
		return fail(fmt.Errorf("no git commit to record (git rev-parse HEAD failed in %s); -allow-dirty writes the trace without one", root))
	case strings.HasSuffix(commit, "+dirty") && !*allowDirty:
		return fail(errors.New("the work tree has uncommitted changes (git status --porcelain), so the commit would not name the code that made the trace; commit first, or pass -allow-dirty"))
	}

	temp, err := os.MkdirTemp("", "softgpu-trace-")
	if err != nil {
		return fail(err)
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(temp)
		}
	}()
	tracePath := filepath.Join(temp, "trace.json")

	date := time.Now().UTC()
	c.Printf("running %s in %s with %s=%s", *bench, *stage, traceEnv, tracePath)
	output, err := runBenchmark(ctx, filepath.Join(root, *stage), *bench, benchtime.String(),
		slices.Concat(env, []string{traceEnv + "=" + tracePath}), c.Stderr)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", *stage, err))
	}
	var ran []string
	if parsed, err := benchfmt.ParseString(output); err == nil {
		ran = parsed.Names()
	}
	if len(ran) == 0 {
		return fail(fmt.Errorf("no benchmark of %s matched -bench %q", *stage, *bench))
	}
	data, err := os.ReadFile(tracePath)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("%s ran but wrote no trace to %s: does %s write traces yet, and did a device close?", strings.Join(ran, ", "), traceEnv, *stage))
	}
	if err != nil {
		return fail(err)
	}
	t, err := trace.Parse(data)
	if err != nil {
		keep = true
		return fail(fmt.Errorf("the trace %s wrote is not valid (kept at %s): %w", *stage, tracePath, err))
	}
	if len(ran) > 1 {
		c.Printf("warning: %d benchmarks ran (%s); the trace is whichever device closed last. Narrow -bench to one leaf benchmark.",
			len(ran), strings.Join(ran, ", "))
	}

	machine := record.DetectMachine(ctx, "")
	meta := trace.Meta{
		Command:    cli.CommandLine(Command, cli.WithoutFlag(args, "out", true)), // where this run writes is not part of how the trace is made
		Stage:      *stage,
		Bench:      *bench,
		Benchtime:  benchtime.String(),
		Env:        env,
		Benchmarks: ran,
		Commit:     commit,
		Date:       date.Format(time.RFC3339),
		Machine:    trace.Machine{CPU: machine.CPU, Cores: machine.Cores, OS: machine.OS, Go: machine.Go},
	}
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	traceFile := filepath.Join(dir, *name+".json")
	metaFile := trace.MetaPath(traceFile)
	// As a pair: a failure leaves neither a new meta beside an old trace
	// nor a new trace beside an old meta.
	if err := records.WriteFiles(records.File{Path: traceFile, Data: data}, records.File{Path: metaFile, Data: append(metaJSON, '\n')}); err != nil {
		return fail(err)
	}
	c.Printf("wrote %s (%d events, %d dropped) and %s", traceFile, len(t.Events), t.Dropped, metaFile)
	if err := trace.Summarise(t).Format(c.Stdout); err != nil {
		return fail(err)
	}
	return cli.ExitOK
}

// runBenchmark runs go test's benchmarks in stageDir with env added to this
// process's environment, copying its output to progress, and returns the
// standard output.
func runBenchmark(ctx context.Context, stageDir, bench, benchtime string, env []string, progress io.Writer) (string, error) {
	// ExecGroup: ending ctx kills go test and the test binary it started.
	cmd := cli.ExecGroup(ctx, "go", "test", "-run", "^$", "-bench", bench, "-benchtime", benchtime, ".")
	cmd.Dir = stageDir
	cmd.Env = append(os.Environ(), env...) // later entries win: env overrides the inherited ones
	var output bytes.Buffer
	cmd.Stdout = io.MultiWriter(&output, progress)
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return output.String(), fmt.Errorf("go test: %w", err)
	}
	return output.String(), nil
}
