// Command record measures stages for the book and writes a record: it runs
// every chosen stage's benchmarks in several canary-gated passes and writes
// book/records/NAME.json (machine, date, commit, command, canary per pass,
// limits, and every row's best and median) and NAME.txt (the accepted
// passes in benchstat's format, one "stage:" label per stage).
//
//	go run ./tools/cmd/record -name stages
//	go run ./tools/cmd/record -stages stage4-nolock,stage7-idle -bench '^BenchmarkGap$' -passes 5 -name gap
//	go run ./tools/cmd/record -env SOFTGPU_IDLE=spin -name gate-spin
//	go tool benchstat -col stage book/records/stages.txt
//
// Each stage's test binary is built once (go test -c) and run from the
// stage directory. An interrupt (Ctrl-C, SIGTERM) kills the benchmark
// running and writes nothing. See tools/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/record"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		name            = fs.String("name", "", "record name: writes `NAME`.json and NAME.txt (required)")
		out             = fs.String("out", "", "directory to write into (default: book/records under the repository root)")
		stageList       = fs.String("stages", "", "comma-separated stage directories (default: every existing stage)")
		passes          = fs.Int("passes", 3, "accepted passes wanted")
		bench           = fs.String("bench", ".", "benchmarks to run, a -test.bench `regexp`")
		benchtime       = fs.String("benchtime", "1s", "-test.benchtime of each benchmark in each pass")
		threshold       = fs.Float64("threshold", 0.5, "reject a pass whose canary is more than this `fraction` slower than the run's best")
		maxRejects      = fs.Int("max-rejects", 3, "re-run at most this many rejected passes, then give up")
		strict          = fs.Bool("strict", false, "on giving up, fail and write nothing (default: keep the accepted passes and say so in the record)")
		canaryCount     = fs.Int("canary-count", 5, "canary runs per measurement; the canary is their median")
		canaryBenchtime = fs.String("canary-benchtime", "100ms", "-test.benchtime of each canary run")
		label           = fs.String("label", "this machine", "machine label shown in the book's tables")
		env             cli.EnvFlag
	)
	fs.Var(&env, "env", "`KEY=VALUE` for every benchmark process, recorded in the settings (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./tools/cmd/record -name NAME [flags]\n\n")
		fmt.Fprintf(stderr, "Runs the benchmarks of the chosen stages in canary-gated passes and writes\nNAME.json and NAME.txt (benchstat format) into book/records.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := cli.ParseFlags(fs, args); done {
		return code
	}
	usage := cli.Misuse(stderr, "record")
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments %q", fs.Args())
	case *name == "":
		return usage("-name is required: the record is written to NAME.json and NAME.txt")
	case strings.ContainsAny(*name, `/\`) || strings.HasPrefix(*name, "."):
		return usage("-name %q must be a plain file name, without directories or a leading dot", *name)
	case *passes < 1:
		return usage("-passes %d: want at least 1", *passes)
	case *threshold < 0:
		return usage("-threshold %v: want 0 or more", *threshold)
	case *maxRejects < 0:
		return usage("-max-rejects %d: want 0 or more", *maxRejects)
	case *canaryCount < 1:
		return usage("-canary-count %d: want at least 1", *canaryCount)
	case *benchtime == "" || *canaryBenchtime == "":
		return usage("-benchtime and -canary-benchtime must not be empty")
	}

	root, err := stages.Root()
	if err != nil {
		fmt.Fprintf(stderr, "record: %v\n", err)
		return cli.ExitFailed
	}
	chosen, err := stages.Select(root, *stageList)
	if err != nil {
		return usage("%v", err)
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join(root, "book", "records")
	}
	cfg := record.Config{
		Stages:          stages.Dirs(chosen),
		Bench:           *bench,
		Benchtime:       *benchtime,
		Passes:          *passes,
		Threshold:       *threshold,
		MaxRejects:      *maxRejects,
		Strict:          *strict,
		CanaryCount:     *canaryCount,
		CanaryBenchtime: *canaryBenchtime,
		Env:             env,
		Progress:        stderr,
	}
	prov := record.Provenance{
		Date:    time.Now(),
		Command: cli.CommandLine("go run ./tools/cmd/record", args),
		Commit:  record.Commit(ctx, root),
		Machine: record.DetectMachine(ctx, *label),
	}

	err = measure(ctx, root, dir, *name, cfg, prov, stderr)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "record: interrupted; nothing written\n")
		return cli.ExitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "%v\n", err)
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// measure builds the stages, runs the passes and writes the two files.
func measure(ctx context.Context, root, dir, name string, cfg record.Config, prov record.Provenance, stderr io.Writer) error {
	binDir, err := os.MkdirTemp("", "softgpu-record-")
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer os.RemoveAll(binDir)
	bins, err := benchrun.BuildAll(ctx, root, cfg.Stages, binDir, stderr)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	res, err := record.Measure(ctx, cfg, bins)
	if err != nil {
		return err
	}
	rec := record.NewRecord(name, cfg, res, prov)
	text, err := record.Text(res)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := record.Write(dir, rec, text); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "record: wrote %s.json and %s.txt: %d rows, %d limits, %d passes accepted, %d rejected\n",
		filepath.Join(dir, name), filepath.Join(dir, name), len(rec.Rows), len(rec.Limits), len(res.Passes), res.Rejected)
	fmt.Fprintf(stderr, "record: compare the stages with: go tool benchstat -col stage %s.txt\n", filepath.Join(dir, name))
	return nil
}
