// Command exercises checks the book's exercise checkers against their
// reference solutions (package softgpu/tools/internal/exercises says what
// a checker and a solution are):
//
//	go run ./tools/cmd/exercises              # every exercise, in build order
//	go run ./tools/cmd/exercises -list        # list them; run nothing
//	go run ./tools/cmd/exercises -run '^9\.'  # those whose number matches
//
// For each, on a fresh copy of its stage (GOWORK=off): the checker must
// fail, the solution must apply, the checker must then pass, the
// checker's package must pass its normal tests (-short) and every package
// the solution changes go vet.
// It prints one line per exercise with the time of each phase, then
// "exercises: N passed, N failed", and exits 1 if any failed or if a
// checker has no solution (or a solution no checker). CI runs it
// (.ci/run).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/exercises"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: go run ./tools/cmd/exercises [-list] [-run REGEXP] [-v]

Runs every exercise checker (exercise_<n>_test.go, build tag exercise) on
a copy of its stage: it must FAIL there, PASS with its reference solution
(book/solutions/<stage>/<n>.patch), and with it the checker's package
must pass its own tests and the packages the solution changes go vet. One line per exercise, then
"exercises: N passed, N failed"; exit 1 on any failure.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("exercises", usage, stdout, stderr)
	var (
		list    = c.Flags.Bool("list", false, "list the exercises with checkers; run nothing")
		match   = c.Flags.String("run", "", "run only exercises whose number (\"9.1\") matches this `regexp`")
		verbose = c.Flags.Bool("v", false, "print each phase's output, not only a failed one's")
	)
	rest, code, done := c.Parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return c.Misuse("unexpected argument %q", rest[0])
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		return c.Misuse("invalid value %q for flag -run: %v", *match, err)
	}
	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	all, problems, err := exercises.Find(root)
	if err != nil {
		return c.Fail(err)
	}
	for _, p := range problems {
		fmt.Fprintf(stdout, "FAIL %s\n", p)
	}
	var chosen []exercises.Exercise
	for _, e := range all {
		if re.MatchString(e.Name()) {
			chosen = append(chosen, e)
		}
	}
	if len(chosen) == 0 && *match != "" {
		// A -run that selects nothing is a typo, not a pass.
		return c.Fail(fmt.Errorf("no exercise matches -run %q (%d exercises in all)", *match, len(all)))
	}
	if *list {
		for _, e := range chosen {
			fmt.Fprintf(stdout, "%-5s %s/%s  %s  %s\n", e.Name(), e.Stage, e.Checker, e.Test(), e.Solution)
		}
		return exitFor(len(problems))
	}
	passed, failed := 0, len(problems)
	for _, e := range chosen {
		r := exercises.Run(ctx, root, e, nil)
		if ctx.Err() != nil {
			return cli.ExitInterrupted
		}
		line := fmt.Sprintf("%-5s %s/%s: untouched FAIL %v, solution PASS %v, go test %s + go vet %s %v",
			e.Name(), e.Stage, e.Checker, round(r.Untouched), round(r.Solved), e.Pkg(), strings.Join(r.Packages, " "), round(r.Tests))
		if r.Err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL %s\n     %v\n--- output (last 40 lines):\n%s\n", line, r.Err, tail(r.Output, 40))
			continue
		}
		passed++
		fmt.Fprintf(stdout, "ok   %s\n", line)
		if *verbose {
			fmt.Fprintln(stdout, r.Output)
		}
	}
	fmt.Fprintf(stdout, "exercises: %d passed, %d failed\n", passed, failed)
	return exitFor(failed)
}

func exitFor(failed int) int {
	if failed > 0 {
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
