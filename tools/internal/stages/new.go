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
// the way every stage begins (DESIGN §8): every file the predecessor's tree
// holds (the same files DiffStages compares) is copied with the module path
// renamed wherever it appears — go.mod, imports, READMEs — and the new
// directory is added to go.work with `go work use`.
//
// The copy is made in a temporary directory beside the target and renamed
// into place, so a failed copy leaves no half-made stage behind. It returns
// the number of files copied.
func NewStage(ctx context.Context, root, dir string) (int, error) {
	stage, ok := Lookup(dir)
	if !ok {
		return 0, fmt.Errorf("stages new: unknown stage %q; stages are: %s", dir, strings.Join(Dirs(Order), ", "))
	}
	if stage.Predecessor == "" {
		return 0, fmt.Errorf("stages new: %s is the first stage in build order and has no predecessor to copy", dir)
	}
	target := filepath.Join(root, dir)
	if _, err := os.Stat(target); err == nil {
		return 0, fmt.Errorf("stages new: %s already exists", target)
	}
	if err := CheckExists(root, stage.Predecessor); err != nil {
		return 0, fmt.Errorf("stages new: %s is copied from its predecessor %s: %w", dir, stage.Predecessor, err)
	}
	files, err := readTree(root, stage.Predecessor)
	if err != nil {
		return 0, fmt.Errorf("stages new: %w", err)
	}

	tmp, err := os.MkdirTemp(root, "."+dir+".new*")
	if err != nil {
		return 0, fmt.Errorf("stages new: %w", err)
	}
	defer os.RemoveAll(tmp) // after the rename below, tmp no longer exists
	from, to := ModulePath(stage.Predecessor), ModulePath(dir)
	for _, f := range files {
		data := f.Data
		if !isBinary(data) {
			data = []byte(Rename(string(data), from, to))
		}
		p := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, fmt.Errorf("stages new: %w", err)
		}
		if err := os.WriteFile(p, data, f.Mode.Perm()); err != nil {
			return 0, fmt.Errorf("stages new: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, fmt.Errorf("stages new: %w", err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return 0, fmt.Errorf("stages new: %w", err)
	}

	cmd := exec.CommandContext(ctx, "go", "work", "use", "./"+dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return len(files), fmt.Errorf("stages new: copied %s to %s, but `go work use ./%s` failed (run it yourself): %w\n%s",
			stage.Predecessor, dir, dir, err, out)
	}
	return len(files), nil
}
