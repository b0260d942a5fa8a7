// Command record measures stages for the book and writes a record: it runs
// every chosen stage's benchmarks in several passes, re-runs each row whose
// own canary moved while it ran, and writes book/records/NAME.json
// (machine, date, commit, command, every row's values per pass with best,
// median, min, max and canary) and NAME.txt (the passes in benchstat's
// format, one "stage:" label per stage).
//
//	go run ./tools/cmd/record -name stages
//	go run ./tools/cmd/record -stages stage4-nolock,stage7-idle -bench '^BenchmarkGap$' -name gap
//	go run ./tools/cmd/record -env SOFTGPU_IDLE=spin -name gate-spin
//	go tool benchstat -col stage book/records/stages.txt
//	go run ./tools/cmd/record -retake -out /tmp/edition   every record and trace of the book, one commit
//
// Before it measures anything it refuses what would waste or spoil the run:
// a bad flag, an -out it could not write, a tree with uncommitted changes
// (without -allow-dirty), a committed record of the same name (without
// -force). Each stage's test binary is built once (go test -c) and run from
// the stage directory. A signal (Ctrl-C, SIGTERM, SIGHUP) kills the
// benchmark running and writes nothing. See tools/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/record"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: go run ./tools/cmd/record -name NAME [flags]
       go run ./tools/cmd/record -retake -out DIR

Runs the benchmarks of the chosen stages in -passes passes and writes
NAME.json and NAME.txt (benchstat format) into book/records. Every row reports
a canary measured in its own process right before and after it; a row whose
canary moved by more than -canary-tolerance is re-run alone, up to -max-reruns
times. It says how long the run should take before starting (every stage at the
defaults: about 2 h 21 min before canaries and re-runs, derived in
tools/README.md, and longer on a noisy machine) and how long is left as it goes.

With -retake it re-takes every record of book/records, then every trace of
book/traces, each with its own kept command, one after another at one commit,
into DIR/records and DIR/traces (DIR outside the repository): the book's next
edition, installed with cp -r DIR/records DIR/traces book/. It skips
transcriptions (reference.json) and records or traces kept as an earlier
edition of another (idle-before.json), and says so.

The command a record keeps is the one given, without its -out: the line a
reader re-runs to make the record again in book/records.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("record", usage, stdout, stderr)
	fs := c.Flags
	var (
		name            = fs.String("name", "", "record name: writes `NAME`.json and NAME.txt (required)")
		out             = fs.String("out", "", "`directory` to write into (default: book/records under the repository root)")
		stageList       = fs.String("stages", "", "comma-separated stage directories (default: every existing stage)")
		passes          = fs.Int("passes", 5, "passes: every row is measured this many times")
		bench           = fs.String("bench", ".", "benchmarks to run, a -test.bench `regexp`")
		benchtime       = benchrun.MustBenchtime("1s")
		tolerance       = fs.Float64("canary-tolerance", records.DefaultCanaryTolerance, "re-run a row whose canaries differ by more than this `ratio` (max/min, at least 1)")
		maxReruns       = fs.Int("max-reruns", 3, "re-run a row whose canary moved at most this many times per pass, then keep its steadiest run and mark it unsteady")
		canaryCount     = fs.Int("canary-count", 5, "pass canary: runs per measurement; the canary is their median")
		canaryBenchtime = benchrun.MustBenchtime("100ms")
		label           = fs.String("label", "this machine", "machine label shown in the book's tables")
		allowDirty      = fs.Bool("allow-dirty", false, "measure a tree with uncommitted changes; the record is marked dirty")
		force           = fs.Bool("force", false, "replace a record of the same name that git tracks")
		retakeAll       = fs.Bool("retake", false, "re-take every record of book/records and trace of book/traces with its own kept command, into -out (outside the repository), from a clean tree: one edition at one commit")
		env             cli.EnvFlag
	)
	fs.Var(&benchtime, "benchtime", "-test.benchtime of each benchmark in each pass: a `duration` (1s) or a count (100x)")
	fs.Var(&canaryBenchtime, "canary-benchtime", "-test.benchtime of each pass canary run")
	fs.Var(&env, "env", "`KEY=VALUE` for every benchmark process, recorded in the settings (repeatable)")
	rest, code, done := c.Parse(args)
	if done {
		return code
	}
	if *retakeAll {
		var others []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "retake" && f.Name != "out" && f.Name != "force" {
				others = append(others, "-"+f.Name)
			}
		})
		switch {
		case len(rest) > 0:
			return c.Misuse("unexpected arguments %q (flags only)", rest)
		case len(others) > 0:
			return c.Misuse("-retake takes only -out and -force: each record's own command says the rest (not %s)", strings.Join(others, ", "))
		}
		root, err := stages.Root()
		if err != nil {
			return c.Fail(err)
		}
		return retake(ctx, c, root, *out, *force, runRetakeItem)
	}
	switch {
	case len(rest) > 0:
		return c.Misuse("unexpected arguments %q (flags only)", rest)
	case *name == "":
		return c.Misuse("-name is required: the record is written to NAME.json and NAME.txt")
	case !record.ValidName(*name):
		return c.Misuse("-name %q must be a plain file name, without directories, a leading dot or .json or .txt", *name)
	case *passes < 1:
		return c.Misuse("-passes %d: want at least 1", *passes)
	case !(*tolerance >= 1) || math.IsInf(*tolerance, 1): // NaN too: the record could not be written at the end
		return c.Misuse("-canary-tolerance %v: want a finite 1 or more (the slower canary over the faster)", *tolerance)
	case *maxReruns < 0:
		return c.Misuse("-max-reruns %d: want 0 or more", *maxReruns)
	case *canaryCount < 1:
		return c.Misuse("-canary-count %d: want at least 1", *canaryCount)
	}
	if _, err := regexp.Compile(*bench); err != nil {
		return c.Misuse("-bench %q: %v", *bench, err)
	}

	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	chosen, err := stages.Select(root, *stageList)
	if err != nil {
		return c.Misuse("-stages: %v", err)
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join(root, "book", "records")
	}
	if err := records.ProbeDir(dir); err != nil {
		return c.Misuse("-out %s: %v", dir, err)
	}
	jsonPath, textPath := record.Paths(dir, *name)
	if tracked := record.Tracked(ctx, jsonPath, textPath); len(tracked) > 0 && !*force {
		c.Printf("%s %s committed: a new record would replace %s; add -force to re-record it, or choose another -name",
			strings.Join(tracked, " and "), plural(len(tracked), "is", "are"), plural(len(tracked), "it", "them"))
		return cli.ExitFailed
	}
	commit := record.Head(ctx, root)
	changes, known := record.Changes(ctx, root)
	dirty := known && len(changes) > 0
	if dirty && !*allowDirty {
		c.Printf("the tree has uncommitted changes (%s): a record names the commit it measured, so commit or stash them first, or add -allow-dirty (the record is then marked dirty)",
			summarise(changes, 4))
		return cli.ExitFailed
	}

	cfg := record.Config{
		Stages:          stages.Dirs(chosen),
		Bench:           *bench,
		Benchtime:       benchtime,
		Passes:          *passes,
		CanaryTolerance: *tolerance,
		MaxReruns:       *maxReruns,
		CanaryCount:     *canaryCount,
		CanaryBenchtime: canaryBenchtime,
		Env:             env,
		Progress:        c.Printf,
	}
	prov := record.Provenance{
		Date:    time.Now(),
		Command: cli.CommandLine("go run ./tools/cmd/record", cli.WithoutFlag(args, "out", true)), // where this run writes is not part of how the record is made
		Commit:  commit,
		Dirty:   dirty,
		Machine: record.DetectMachine(ctx, *label),
	}
	if dirty {
		c.Printf("warning: measuring a tree with uncommitted changes (-allow-dirty); the record is marked dirty")
	}
	err = measure(ctx, c, root, dir, *name, cfg, prov)
	switch {
	case ctx.Err() != nil:
		c.Printf("interrupted; nothing written")
		return cli.ExitInterrupted
	case err != nil:
		return c.Fail(err)
	}
	return cli.ExitOK
}

// measure builds the stages, runs the passes and writes the two files.
func measure(ctx context.Context, c *cli.Command, root, dir, name string, cfg record.Config, prov record.Provenance) error {
	binDir, err := os.MkdirTemp("", "softgpu-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	bins, err := benchrun.BuildAll(ctx, root, cfg.Stages, binDir, c.Printf)
	if err != nil {
		return err
	}
	res, err := record.Measure(ctx, cfg, bins)
	if err != nil {
		return err
	}
	rec := record.NewRecord(name, cfg, res, prov)
	text, err := record.Text(res)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if verr := records.Validate(rec); verr != nil {
		// Keep the run for inspection, but out of the book.
		keep, err := os.MkdirTemp("", "softgpu-record-invalid-")
		if err == nil {
			err = record.Write(keep, rec, text)
		}
		if err != nil {
			return fmt.Errorf("the record holds impossible values, so nothing was written:\n%v", verr)
		}
		return fmt.Errorf("the record holds impossible values, so nothing was written to %s (the run is kept in %s for inspection):\n%v", dir, keep, verr)
	}
	if err := record.Write(dir, rec, text); err != nil {
		return err
	}
	jsonPath, textPath := record.Paths(dir, name)
	unsteady := 0
	for _, r := range append(rec.Rows[:len(rec.Rows):len(rec.Rows)], rec.Limits...) {
		if r.Unsteady {
			unsteady++
		}
	}
	c.Printf("wrote %s and %s: %d rows, %d limits, %d passes; %d %s re-run (%d re-runs in all), %d unsteady",
		jsonPath, textPath, len(rec.Rows), len(rec.Limits), len(res.Passes), rec.RowsRerun, plural(rec.RowsRerun, "row", "rows"), res.Reruns, unsteady)
	c.Printf("compare the stages with: go tool benchstat -col stage %s", textPath)
	return nil
}

// summarise lists the first n entries of a list and how many more there are.
func summarise(entries []string, n int) string {
	if len(entries) <= n {
		return strings.Join(entries, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(entries[:n], ", "), len(entries)-n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
