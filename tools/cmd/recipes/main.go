// Command recipes runs the shell recipes the READMEs mark as promises
// (`<!-- recipe -->` above a ```sh block; package softgpu/tools/internal/recipes
// says how they are found), each exactly as written, in the directory its
// marker names, and fails when one fails:
//
//	go run ./tools/cmd/recipes            # run them all, in README order
//	go run ./tools/cmd/recipes -list      # list them with their directories
//	go run ./tools/cmd/recipes -run stage5  # those whose README path matches
//
// Each recipe runs under `bash -e -o pipefail` with HOME set to a fresh
// directory (so `cp -r stage0-mailbox ~/hw` lands there, not in yours) and
// Go's caches left where they are. It prints each recipe's duration, so the
// durations the READMEs state can be checked against a run, and ends with
// "recipes: N passed, N failed". CI runs it (.ci/run). See tools/README.md.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/recipes"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: go run ./tools/cmd/recipes [-list] [-run REGEXP] [-timeout D] [-v]

Runs every README recipe (a ` + "```sh" + ` block under a <!-- recipe --> marker)
exactly as written, one after another, and exits 1 if any fails. Each
runs with bash -e -o pipefail in its marker's directory, with HOME set to
a fresh directory. Prints each recipe's time, then "N passed, N failed".
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("recipes", usage, stdout, stderr)
	var (
		list    = c.Flags.Bool("list", false, "list the recipes and where they run; run nothing")
		match   = c.Flags.String("run", "", "run only recipes whose README:line matches this `regexp`")
		timeout = c.Flags.Duration("timeout", 10*time.Minute, "stop a recipe that runs longer than `D`")
		verbose = c.Flags.Bool("v", false, "print every recipe's output, not only a failed one's")
	)
	rest, code, done := c.Parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return c.Misuse("unexpected argument %q", rest[0])
	}
	if *timeout <= 0 {
		return c.Misuse("invalid value %v for flag -timeout: want a positive duration", *timeout)
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		return c.Misuse("invalid value %q for flag -run: %v", *match, err)
	}
	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	all, err := recipes.Find(root)
	if err != nil {
		return c.Fail(err)
	}
	var chosen []recipes.Recipe
	for _, r := range all {
		if re.MatchString(r.Name()) {
			chosen = append(chosen, r)
		}
	}
	if len(chosen) == 0 {
		return c.Fail(fmt.Errorf("no recipe matches -run %q (%d recipes in all)", *match, len(all)))
	}
	if *list {
		for _, r := range chosen {
			fmt.Fprintf(stdout, "%-40s in %s\n", r.Name(), r.Dir)
		}
		return cli.ExitOK
	}
	env, err := recipeEnv(ctx)
	if err != nil {
		return c.Fail(err)
	}
	passed, failed := 0, 0
	for _, r := range chosen {
		home, err := os.MkdirTemp("", "softgpu-recipe-home-")
		if err != nil {
			return c.Fail(err)
		}
		start := time.Now()
		out, err := runOne(ctx, root, r, append(env, "HOME="+home), *timeout)
		os.RemoveAll(home)
		took := time.Since(start).Round(100 * time.Millisecond)
		if ctx.Err() != nil {
			return cli.ExitInterrupted
		}
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "FAIL %s (in %s) after %v: %v\n", r.Name(), r.Dir, took, err)
			fmt.Fprintf(stdout, "--- the recipe:\n%s--- its output (last 60 lines):\n%s\n", r.Script, tail(out, 60))
			continue
		}
		passed++
		fmt.Fprintf(stdout, "ok   %s (in %s) %v\n", r.Name(), r.Dir, took)
		if *verbose {
			stdout.Write(out)
		}
	}
	fmt.Fprintf(stdout, "recipes: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// runOne runs one recipe and returns its combined output.
func runOne(ctx context.Context, root string, r recipes.Recipe, env []string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := cli.ExecGroup(ctx, "bash", "-e", "-o", "pipefail", "-c", r.Script)
	cmd.Dir = filepath.Join(root, filepath.FromSlash(r.Dir))
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %v", timeout)
	}
	return out.Bytes(), err
}

// recipeEnv is the environment every recipe gets: the tool's own, without
// HOME (each recipe has its own), with Go's caches pinned to where they are
// now, so a fresh HOME does not mean a cold build and a new module download.
func recipeEnv(ctx context.Context) ([]string, error) {
	pinned := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		v, err := exec.CommandContext(ctx, "go", "env", k).Output()
		if err != nil {
			return nil, fmt.Errorf("go env %s: %w", k, err)
		}
		pinned[k] = strings.TrimSpace(string(v))
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || pinned[k] != "" {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		env = append(env, k+"="+pinned[k])
	}
	return env, nil
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
