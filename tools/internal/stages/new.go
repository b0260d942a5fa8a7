package stages

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NewStage starts the stage dir as a copy of its predecessor in build order,
// the way every stage begins (DESIGN.md §8): every file the predecessor's
// tree holds (the same files DiffStages compares) is copied with the module
// path renamed wherever it appears — go.mod, imports, READMEs — the
// README's title (its first heading) names the new stage, and the new
// directory is added to go.work with `go work use` and, in a git work
// tree, to git's index with intent to add (`git add -N`), so that `stages
// diff` and `stages forward`, which refuse files git does not know, take
// the new stage at once.
//
// The copy is made in a temporary directory beside the target and renamed
// into place, so a failed copy leaves no half-made stage behind. It returns
// the number of files copied.
func NewStage(ctx context.Context, root, dir string) (int, error) {
	if err := CheckNew(root, dir); err != nil {
		return 0, err
	}
	stage, _ := Lookup(dir)
	target := filepath.Join(root, dir)
	files, err := readTree(root, stage.Predecessor)
	if err != nil {
		return 0, err
	}

	tmp, err := os.MkdirTemp(root, "."+dir+".new*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp) // after the rename below, tmp no longer exists
	from, to := ModulePath(stage.Predecessor), ModulePath(dir)
	for _, f := range files {
		data := f.Data
		if !isBinary(data) {
			data = []byte(Rename(string(data), from, to))
		}
		if f.Path == "README.md" {
			data = []byte(Retitle(string(data), stage.Predecessor, dir))
		}
		p := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(p, data, f.Mode.Perm()); err != nil {
			return 0, err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return 0, err
	}

	cmd := exec.CommandContext(ctx, "go", "work", "use", "./"+dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return len(files), fmt.Errorf("copied %s to %s, but `go work use ./%s` failed (run it yourself): %w\n%s",
			stage.Predecessor, dir, dir, err, out)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return len(files), nil
	}
	if out, err := Git(ctx, root, "rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(out) != "true" {
		return len(files), nil // a copied-out tree, the test fixtures: nothing to tell git
	}
	if _, err := Git(ctx, root, "add", "-N", "--", dir); err != nil {
		return len(files), fmt.Errorf("copied %s to %s, but `git add -N %s` failed (run it, or git add %s, yourself): %w", stage.Predecessor, dir, dir, dir, err)
	}
	return len(files), nil
}

// CheckNew returns nil if NewStage can make dir, and otherwise an ErrName
// error saying why not: dir is not one of the ten stages, is the first (it
// has no predecessor to copy), exists already, or its predecessor does not
// exist yet.
func CheckNew(root, dir string) error {
	if err := CheckKnown(dir); err != nil {
		return err
	}
	stage, _ := Lookup(dir)
	if stage.Predecessor == "" {
		return nameErrorf("%s is the first stage in build order and has no predecessor to copy", dir)
	}
	if _, err := os.Stat(filepath.Join(root, dir)); err == nil {
		return nameErrorf("%s already exists", filepath.Join(root, dir))
	}
	if err := CheckExists(root, stage.Predecessor); err != nil {
		return nameErrorf("%s is made from its predecessor %s, which does not exist under %s yet", dir, stage.Predecessor, root)
	}
	return nil
}

// Retitle renames a stage README's title, its first "# " heading: the
// predecessor's name in it becomes the new stage's, or, if the heading
// does not name the predecessor, the heading becomes "# " + to. The rest of
// the README is the new stage's author's to rewrite.
func Retitle(readme, from, to string) string {
	lines := strings.SplitAfter(readme, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "# ") {
			continue
		}
		body := strings.TrimRight(line, "\r\n")
		end := line[len(body):]
		if strings.Contains(body, from) {
			body = strings.ReplaceAll(body, from, to)
		} else {
			body = "# " + to
		}
		lines[i] = body + end
		break
	}
	return strings.Join(lines, "")
}
