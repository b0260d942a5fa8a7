package stages

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"softgpu/tools/internal/cli"
)

// Forward carries a fix forward (DESIGN.md §8): the uncommitted change in one
// stage is applied to every later existing stage in build order.
//
// The change is what `git diff HEAD` shows for the stage directory. A new
// file is part of it once git knows it (`git add`, or `git add -N` to keep it
// unstaged); while the stage holds an untracked, not ignored file, Forward
// refuses (UntrackedError) rather than guess whether that file is part of
// the fix or a stray benchmark output. Its paths are made
// relative to the stage and its module path replaced by Placeholder; for each
// later stage the placeholder becomes that stage's module path and the patch
// is applied with `git apply --reject`, which applies every hunk it can and
// leaves the others in a .rej file beside the target. Forward needs git; it
// is a developer command, not part of the book build.

// ForwardResult is what happened in one later stage.
type ForwardResult struct {
	Stage    string
	Problems []string // one line per hunk or file that did not apply; none when all applied
	Output   string   // git apply's own messages, for detail
}

// Forward applies the uncommitted change in stage dir to every later existing
// stage. With check set it only reports what would not apply (git apply
// --check) and changes nothing.
func Forward(ctx context.Context, root, dir string, check bool) ([]ForwardResult, error) {
	if err := CheckExists(root, dir); err != nil {
		return nil, err
	}
	stage, _ := Lookup(dir)
	patch, err := uncommittedPatch(ctx, root, dir)
	if err != nil {
		return nil, err
	}
	if err := CheckTracked(ctx, root, dir); err != nil {
		return nil, err
	}
	if patch == "" {
		return nil, fmt.Errorf("%s has no uncommitted change to forward", dir)
	}
	top, err := Git(ctx, root, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	top = strings.TrimSpace(top)

	var results []ForwardResult
	for _, later := range Existing(root) {
		if later.Build <= stage.Build {
			continue
		}
		rel, err := relPath(top, filepath.Join(root, later.Dir))
		if err != nil {
			return results, err
		}
		args := []string{"apply", "--reject", "--whitespace=nowarn", "--directory=" + rel, "-"}
		if check {
			args = []string{"apply", "--check", "--whitespace=nowarn", "--directory=" + rel, "-"}
		}
		cmd := cli.ExecGroup(ctx, "git", args...)
		cmd.Dir = top
		cmd.Stdin = strings.NewReader(Rename(patch, Placeholder, ModulePath(later.Dir)))
		out, runErr := cmd.CombinedOutput()
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
		res := ForwardResult{Stage: later.Dir, Output: string(out)}
		if runErr != nil {
			res.Problems = applyProblems(string(out), check)
			if len(res.Problems) == 0 {
				res.Problems = []string{fmt.Sprintf("git apply failed (%v): %s", runErr, strings.TrimSpace(string(out)))}
			}
		}
		results = append(results, res)
	}
	return results, nil
}

// uncommittedPatch returns the normalised patch of the change in dir: what
// `git diff HEAD` shows, new files added with git add -N included.
func uncommittedPatch(ctx context.Context, root, dir string) (string, error) {
	stageDir := filepath.Join(root, dir)
	// An exercise's checker is never forwarded: it belongs to its
	// chapter's stage (files.go).
	tracked, err := Git(ctx, stageDir, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", "--relative", "--", ".", ":(exclude,glob)**/exercise_*_test.go")
	if err != nil {
		return "", fmt.Errorf("%w (forward diffs against the last commit; is %s in a git repository with one?)", err, dir)
	}
	return Normalise(tracked, dir), nil
}

// applyProblems turns git apply's messages into one line per failure.
func applyProblems(out string, check bool) []string {
	var problems []string
	file := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Applying patch "):
			file, _, _ = strings.Cut(strings.TrimPrefix(line, "Applying patch "), " with ")
		case strings.HasPrefix(line, "Rejected hunk "):
			hunk := strings.TrimSuffix(strings.TrimPrefix(line, "Rejected hunk "), ".")
			problems = append(problems, fmt.Sprintf("%s: hunk %s does not apply (left in %s.rej)", file, hunk, file))
		case strings.HasPrefix(line, "error: patch failed: "):
			if check {
				where := strings.TrimPrefix(line, "error: patch failed: ")
				if i := strings.LastIndexByte(where, ':'); i >= 0 {
					where = fmt.Sprintf("%s: hunk at line %s does not apply", where[:i], where[i+1:])
				}
				problems = append(problems, where)
			}
		case line == "error: while searching for:", strings.HasSuffix(line, ": patch does not apply"):
			// Detail of a failed hunk, reported by the cases above.
		case strings.HasPrefix(line, "error: "):
			problems = append(problems, strings.TrimPrefix(line, "error: "))
		}
	}
	return problems
}

// Git runs git in dir, in a process group of its own (cli.ExecGroup), and
// returns its standard output; an error carries git's arguments and its
// standard error.
func Git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := cli.ExecGroup(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// relPath returns target relative to base as a slash path, resolving
// symbolic links in both first so that /tmp and its real path compare alike.
func relPath(base, target string) (string, error) {
	b, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", err
	}
	t, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(b, t)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}
