package stages

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Untracked returns the files in the stage directories dirs that git
// neither tracks nor ignores — a benchmark output saved inside a stage, a
// scratch file — as root-relative slash paths, in git's order. Such a file
// is not part of any stage: `stages diff` would show it and `stages
// forward` would carry it to every later stage, so both refuse to run
// while one exists (UntrackedError).
//
// Without git, or outside a git work tree (a copied-out stage, the test
// fixtures), nothing is known to be untracked and it returns none.
func Untracked(ctx context.Context, root string, dirs ...string) ([]string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	if out, err := Git(ctx, root, "rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(out) != "true" {
		return nil, nil
	}
	args := []string{"ls-files", "-z", "--others", "--exclude-standard", "--full-name", "--"}
	for _, d := range dirs {
		args = append(args, filepath.Join(root, d))
	}
	out, err := Git(ctx, root, args...)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, name := range strings.Split(out, "\x00") {
		if name != "" {
			files = append(files, name)
		}
	}
	return files, nil
}

// UntrackedError is the refusal to diff or forward stages holding files git
// does not know.
type UntrackedError struct {
	Files []string // repository-relative
}

func (e *UntrackedError) Error() string {
	const show = 5
	list := e.Files
	more := ""
	if len(list) > show {
		list, more = list[:show], fmt.Sprintf(" and %d more", len(e.Files)-show)
	}
	return fmt.Sprintf("untracked %s %s%s: not part of any stage; delete or move %s (benchmark output belongs outside the tree, e.g. /tmp), or git add %s if %s belong to the stage",
		plural(len(e.Files), "file", "files"), strings.Join(list, ", "), more,
		plural(len(e.Files), "it", "them"), plural(len(e.Files), "it", "them"), plural(len(e.Files), "it does", "they"))
}

// CheckTracked returns an *UntrackedError if a stage in dirs holds an
// untracked, not ignored file.
func CheckTracked(ctx context.Context, root string, dirs ...string) error {
	files, err := Untracked(ctx, root, dirs...)
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return &UntrackedError{Files: files}
	}
	return nil
}
