package record

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
)

// Head returns the full hash of HEAD in the repository at root, or ""
// when there is no git or no commit. A record stores it as its commit and
// says separately whether the tree was dirty.
func Head(ctx context.Context, root string) string {
	return commandIn(ctx, root, "git", "rev-parse", "HEAD")
}

// Commit returns Head with "+dirty" appended when the work tree has
// changes (Changes), the form schema-1 records and trace metadata keep.
func Commit(ctx context.Context, root string) string {
	head := Head(ctx, root)
	if head == "" {
		return ""
	}
	if changes, _ := Changes(ctx, root); len(changes) > 0 {
		head += "+dirty"
	}
	return head
}

// Changes returns `git status --porcelain` of the repository at root, one
// entry per changed or untracked file ("M stage0-mailbox/abi/abi.go",
// "?? notes.txt"); ignored files are not changes. known is false when there
// is no git or root is not in a work tree: nothing can be said.
func Changes(ctx context.Context, root string) (entries []string, known bool) {
	cmd := exec.CommandContext(ctx, "git", "status", "--porcelain")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, false
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			entries = append(entries, strings.Join(strings.Fields(line), " "))
		}
	}
	return entries, true
}

// Tracked returns those of paths that git tracks: files a commit holds,
// which a new record must not silently replace. Outside a git work tree it
// returns none.
func Tracked(ctx context.Context, paths ...string) []string {
	var out []string
	for _, p := range paths {
		cmd := exec.CommandContext(ctx, "git", "ls-files", "--error-unmatch", "--", filepath.Base(p))
		cmd.Dir = filepath.Dir(p)
		if cmd.Run() == nil {
			out = append(out, p)
		}
	}
	return out
}

func command(ctx context.Context, name string, args ...string) string {
	return commandIn(ctx, "", name, args...)
}

// commandIn runs a command and returns its trimmed output, or "" if it
// failed.
func commandIn(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
