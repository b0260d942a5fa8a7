package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"softgpu/tools/internal/stages"
)

// A comparison across commits (-at REV): the stage as one commit holds it
// against the stage in the working tree, so that a change can be measured
// against what it changes in alternating rounds, the way the book asks
// any difference across commits to be measured (stage 1's chapter, on
// FillStream at depth 256). The committed stage is copied out of git into
// a temporary directory, not checked out: the working tree, its index and
// its other worktrees are left alone.

// commitStage is one stage as a commit holds it.
type commitStage struct {
	short string // the commit's abbreviated hash, for labels
	tree  string // "<full hash>:<path of the stage in the repository>"
}

// errAtUsage marks the -at errors that are the user's input: refused as
// misuse, exit 2, before anything is built.
var errAtUsage = errors.New("bad -at")

// resolveAt finds stage in the commit rev of the git repository at root.
func resolveAt(ctx context.Context, root, rev, stage string) (commitStage, error) {
	if _, err := gitOut(ctx, root, "rev-parse", "--git-dir"); err != nil {
		return commitStage{}, fmt.Errorf("%w: -at %s: %s is not in a git repository", errAtUsage, rev, root)
	}
	full, err := gitOut(ctx, root, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return commitStage{}, fmt.Errorf("%w: -at %s: no such commit in the repository at %s", errAtUsage, rev, root)
	}
	short, err := gitOut(ctx, root, "rev-parse", "--short", full)
	if err != nil {
		return commitStage{}, err
	}
	// The stage's path in the repository: root need not be its top.
	prefix, err := gitOut(ctx, root, "rev-parse", "--show-prefix")
	if err != nil {
		return commitStage{}, err
	}
	tree := full + ":" + prefix + stage
	if _, err := gitOut(ctx, root, "cat-file", "-e", tree+"/go.mod"); err != nil {
		return commitStage{}, fmt.Errorf("%w: -at %s: commit %s has no stage %s", errAtUsage, rev, short, stage)
	}
	return commitStage{short: short, tree: tree}, nil
}

// label is how the committed stage is named in progress and in
// benchstat's columns: stage1-ring@98b1309.
func (c commitStage) label(stage string) string { return stage + "@" + c.short }

// extract writes the committed stage's files under dir/<stage> and
// returns that directory. Files are written with the modes git records
// (0644, or 0755 for executables); a stage holds no links. (git archive
// honours export-ignore and export-subst in .gitattributes; the repository
// has no such file, and one that dropped or rewrote a stage's file would
// make the base column measure something else.)
func (c commitStage) extract(ctx context.Context, root, stage, dir string) (string, error) {
	archive, err := stages.Git(ctx, root, "archive", "--format=tar", c.tree)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, stage)
	r := tar.NewReader(strings.NewReader(archive))
	for {
		h, err := r.Next()
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return "", fmt.Errorf("git archive %s: %w", c.tree, err)
		}
		name := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(name) {
			return "", fmt.Errorf("git archive %s: entry %q leaves the stage", c.tree, h.Name)
		}
		target := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return "", err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode)&0o755|0o644)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(f, r)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
		case tar.TypeXGlobalHeader:
			// git's pax header carrying the commit id: not a file
		default:
			return "", fmt.Errorf("git archive %s: %s is neither a file nor a directory (type %q)", c.tree, h.Name, h.Typeflag)
		}
	}
}

// gitOut runs git in dir (stages.Git) and returns its output, trimmed.
func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := stages.Git(ctx, dir, args...)
	return strings.TrimSpace(out), err
}
