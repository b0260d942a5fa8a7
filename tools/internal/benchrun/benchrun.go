// Package benchrun builds a stage's benchmark binary once (`go test -c`) and
// runs it as often as a measurement needs, from the stage directory, the way
// `go test -bench` would but without rebuilding or re-linking between runs.
//
// Each stage has exactly one benchmark package, its root package, so one
// binary per stage holds every benchmark of that stage.
package benchrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"softgpu/tools/internal/benchfmt"
	"softgpu/tools/internal/cli"
)

// Binary is a built test binary of one stage.
type Binary struct {
	Stage string // stage directory name, for messages
	Dir   string // the stage directory; the binary runs there, as go test would run it
	Path  string // the executable
}

// Build compiles the root package tests of the stage in stageDir into
// outDir/<stage>.test.
func Build(ctx context.Context, stageDir, outDir string) (*Binary, error) {
	return BuildEnv(ctx, stageDir, outDir)
}

// BuildEnv is Build with env (KEY=VALUE) added to go's environment:
// GOWORK=off builds the stage as the module it is on its own.
func BuildEnv(ctx context.Context, stageDir, outDir string, env ...string) (*Binary, error) {
	stage := filepath.Base(stageDir)
	path := filepath.Join(outDir, stage+".test")
	cmd := cli.ExecGroup(ctx, "go", "test", "-c", "-o", path, ".")
	cmd.Dir = stageDir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("build %s: go test -c: %w\n%s", stage, err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(path); err != nil {
		// go test -c writes nothing for a package without test files.
		return nil, fmt.Errorf("build %s: go test -c made no binary (no test files in the root package?): %s", stage, strings.TrimSpace(string(out)))
	}
	return &Binary{Stage: stage, Dir: stageDir, Path: path}, nil
}

// Options select what a run measures.
type Options struct {
	Bench     string   // -test.bench regexp; "." for all
	Benchtime string   // -test.benchtime, e.g. "1s", "100x"; "" for the default
	Count     int      // -test.count; 0 or 1 for one result per benchmark
	Env       []string // KEY=VALUE added to the environment of the process
}

// Args returns the test binary's arguments for o.
func (o Options) Args() []string {
	args := []string{"-test.run", "^$", "-test.bench", o.Bench}
	if o.Benchtime != "" {
		args = append(args, "-test.benchtime", o.Benchtime)
	}
	if o.Count > 1 {
		args = append(args, "-test.count", strconv.Itoa(o.Count))
	}
	return args
}

// ErrNoResults is returned by Run when the binary reported no benchmark.
var ErrNoResults = errors.New("no benchmark results (does -bench match any benchmark?)")

// Run runs the benchmarks o selects and returns the parsed output. A failed
// benchmark (non-zero exit) is an error carrying the end of its output. If
// ctx is cancelled the process is killed, with anything it started.
func (b *Binary) Run(ctx context.Context, o Options) (*benchfmt.Output, error) {
	cmd := cli.ExecGroup(ctx, b.Path, o.Args()...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", b.Stage, strings.Join(o.Args(), " "), err, tail(stdout.String()+stderr.String(), 20))
	}
	out, err := benchfmt.Parse(&stdout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Stage, err)
	}
	if len(out.Results()) == 0 {
		return nil, fmt.Errorf("%s -test.bench %q: %w", b.Stage, o.Bench, ErrNoResults)
	}
	return out, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
