package exercises

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"softgpu/tools/internal/cli"
)

// Result is what Run found for one exercise. Each phase's duration is
// zero when the phase did not run (an earlier one failed).
type Result struct {
	Exercise
	Untouched time.Duration // the checker on the untouched stage (must fail)
	Solved    time.Duration // the checker with the solution (must pass)
	Tests     time.Duration // the checker's package's own tests, and vet of the changed packages, with the solution
	Packages  []string      // the packages the solution changes (vetted)
	Err       error         // the first phase that went wrong; nil: all held
	Output    string        // that phase's output
}

// ErrChecker wraps every way an exercise can fail Run's three phases.
var ErrChecker = errors.New("exercise")

// Run copies stage e.Stage of root to a directory under os.TempDir and runs the
// three phases (see the package comment) there, with GOWORK=off: a stage
// builds alone, as a student's copy does. env is added to the go
// commands' environment.
func Run(ctx context.Context, root string, e Exercise, env []string) Result {
	r := Result{Exercise: e}
	// The copy goes to the same path every time: Go's build cache keys a
	// package by its directory as well as its content, so a fixed path
	// lets every exercise of a stage, and every later run, reuse the
	// stage's compiled packages; only what a solution changes is built
	// again. The path is the repository's own, so two checkouts never
	// share one; two runs in one checkout at once are not supported.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("softgpu-exercises-%08x", crc32.ChecksumIEEE([]byte(root))), e.Stage)
	if err := os.RemoveAll(dir); err != nil {
		r.Err = err
		return r
	}
	defer func() {
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // if no other stage's copy is in it
	}()
	if err := copyTree(filepath.Join(root, e.Stage), dir); err != nil {
		r.Err = err
		return r
	}
	patch, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.Solution)))
	if err != nil {
		r.Err = err
		return r
	}
	r.Packages = Packages(string(patch))
	env = append(append(os.Environ(), "GOWORK=off"), env...)
	checker := []string{"test", "-tags", "exercise", "-count=1", "-v", "-run", "^" + e.Test() + "$", e.Pkg()}

	out, took, err := goCmd(ctx, dir, env, checker...)
	r.Untouched = took
	switch {
	case err == nil:
		r.Err, r.Output = fmt.Errorf("%w %s: the checker PASSES on the untouched stage; it must fail there", ErrChecker, e.Name()), out
		return r
	case !strings.Contains(out, "--- FAIL: "+e.Test()):
		r.Err, r.Output = fmt.Errorf("%w %s: the checker did not run on the untouched stage (does it compile there?): %v", ErrChecker, e.Name(), err), out
		return r
	}

	apply := exec.CommandContext(ctx, "git", "apply", "--whitespace=nowarn", "-")
	apply.Dir, apply.Stdin = dir, bytes.NewReader(patch)
	if msg, err := apply.CombinedOutput(); err != nil {
		r.Err, r.Output = fmt.Errorf("%w %s: %s does not apply to %s: %v", ErrChecker, e.Name(), e.Solution, e.Stage, err), string(msg)
		return r
	}

	out, took, err = goCmd(ctx, dir, env, checker...)
	r.Solved = took
	switch {
	case err != nil:
		r.Err, r.Output = fmt.Errorf("%w %s: the checker FAILS with the reference solution: %v", ErrChecker, e.Name(), err), out
		return r
	case !strings.Contains(out, "--- PASS: "+e.Test()):
		r.Err, r.Output = fmt.Errorf("%w %s: %s did not run with the solution (no --- PASS line)", ErrChecker, e.Name(), e.Test()), out
		return r
	}

	// The checker's package's own tests, and go vet (which builds every
	// test file) over each package the solution changes: testing every
	// changed package would put stage 9's whole suite into each of its
	// exercises, past CI's budget; vet still catches a solution that
	// breaks another package's build or its tests' build.
	start := time.Now()
	out, _, err = goCmd(ctx, dir, env, "test", "-short", "-count=1", e.Pkg())
	if err != nil {
		r.Tests = time.Since(start)
		r.Err, r.Output = fmt.Errorf("%w %s: with the solution, %s's own tests fail: %v", ErrChecker, e.Name(), e.Pkg(), err), out
		return r
	}
	if len(r.Packages) > 0 {
		out, _, err = goCmd(ctx, dir, env, append([]string{"vet"}, r.Packages...)...)
		if err != nil {
			r.Err, r.Output = fmt.Errorf("%w %s: with the solution, go vet fails in %s: %v", ErrChecker, e.Name(), strings.Join(r.Packages, " "), err), out
		}
	}
	r.Tests = time.Since(start)
	return r
}

// goCmd runs the go command in dir and returns its combined output and
// how long it took.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, time.Duration, error) {
	cmd := cli.ExecGroup(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	return out.String(), time.Since(start), err
}

// copyTree copies the regular files under src to dst, keeping their modes;
// a build product a student's copy would not have (a *.rej, a test
// binary) is no different from a source file here, so the stage is
// expected to be clean, as `record` expects it.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
}
