// Package stages knows the ten stage modules of softgpu: their build order,
// each one's predecessor, where the repository root is, and how two stages
// differ once their module paths are set aside.
//
// Build order is 0 1 2 3 4 7 5 6 8 9: every stage starts as a copy of its
// predecessor in build order (stage5-vm is a copy of stage7-idle), so
// "adjacent stages" always means adjacent in Order, never by directory number.
//
// Invariants:
//   - Order[i].Build == i+1;
//   - Order[0].Predecessor == "" and Order[i].Predecessor == Order[i-1].Dir;
//   - the module path of a stage is ModulePrefix + Dir.
package stages

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModulePrefix is the prefix every module path of the repository shares.
const ModulePrefix = "softgpu/"

// Stage is one stage module.
type Stage struct {
	Dir         string // directory under the root, also the last element of its module path
	Build       int    // 1-based position in build order
	Predecessor string // Dir of the stage it was copied from; "" for stage0-mailbox
}

// Order is every stage, in build order.
var Order = buildOrder(
	"stage0-mailbox",
	"stage1-ring",
	"stage2-fence",
	"stage3-pinned",
	"stage4-nolock",
	"stage7-idle",
	"stage5-vm",
	"stage6-runlist",
	"stage8-managed",
	"stage9-chardev",
)

func buildOrder(dirs ...string) []Stage {
	out := make([]Stage, len(dirs))
	for i, dir := range dirs {
		out[i] = Stage{Dir: dir, Build: i + 1}
		if i > 0 {
			out[i].Predecessor = dirs[i-1]
		}
	}
	return out
}

// Clean trims one trailing slash from a stage's name, as a shell's
// completion writes it ("stage1-ring/"). Every function here that takes a
// stage's name takes it either way; a command cleans the names it keeps.
func Clean(dir string) string { return strings.TrimSuffix(dir, "/") }

// Lookup returns the stage with the given directory name (Clean).
func Lookup(dir string) (Stage, bool) {
	dir = Clean(dir)
	for _, s := range Order {
		if s.Dir == dir {
			return s, true
		}
	}
	return Stage{}, false
}

// Dirs returns the directory names of stages, in the order given.
func Dirs(stages []Stage) []string {
	out := make([]string, len(stages))
	for i, s := range stages {
		out[i] = s.Dir
	}
	return out
}

// ModulePath returns the module path of the stage in dir.
func ModulePath(dir string) string { return ModulePrefix + dir }

// ErrNoRoot is returned by Root when no go.work is found above the
// working directory.
var ErrNoRoot = errors.New("no go.work in this directory or above it (run from inside the softgpu repository)")

// Root walks up from the working directory to the directory that holds
// go.work, the repository root.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, "go.work")); err == nil && !fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRoot
		}
		dir = parent
	}
}

// Existing returns the stages whose directory exists under root, in build
// order.
func Existing(root string) []Stage {
	var out []Stage
	for _, s := range Order {
		if fi, err := os.Stat(filepath.Join(root, s.Dir)); err == nil && fi.IsDir() {
			out = append(out, s)
		}
	}
	return out
}

// Errors in what a user typed, which the commands report as misuse (exit
// 2). Their messages name the bad input and carry no "stages:" prefix, so a
// command can prefix its own name once.
var (
	// ErrName: a stage name that is not one of the ten stages, not made
	// yet, already made, or lacking the predecessor an operation needs.
	ErrName = errors.New("bad stage name")
	// ErrPath: a path filter that names no file of the stages compared.
	ErrPath = errors.New("path matches no file")
)

// inputError is an error in user input of a kind (ErrName, ErrPath).
type inputError struct {
	kind error
	msg  string
}

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == e.kind }

func nameErrorf(format string, a ...any) error {
	return &inputError{kind: ErrName, msg: fmt.Sprintf(format, a...)}
}

// Select resolves a comma-separated list of stage directories against the
// stages that exist under root; an empty list means every existing stage.
// The result is in build order whatever order the list gave. An unknown or
// missing stage, or a list that names no stage at all (",,"), is an
// ErrName error that lists the valid ones.
func Select(root, list string) ([]Stage, error) {
	existing := Existing(root)
	if strings.TrimSpace(list) == "" {
		if len(existing) == 0 {
			return nil, fmt.Errorf("no stage directory under %s", root)
		}
		return existing, nil
	}
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = Clean(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if err := CheckExists(root, name); err != nil {
			return nil, err
		}
		want[name] = true
	}
	if len(want) == 0 {
		return nil, nameErrorf("%q names no stage; existing stages: %s", list, orNone(Dirs(existing)))
	}
	var out []Stage
	for _, s := range existing {
		if want[s.Dir] {
			out = append(out, s)
		}
	}
	return out, nil
}

// CheckKnown returns nil if dir is one of the ten stages, and otherwise an
// ErrName error naming it and the valid choices.
func CheckKnown(dir string) error {
	dir = Clean(dir)
	if _, ok := Lookup(dir); !ok {
		return nameErrorf("unknown stage %q; stages are: %s", dir, strings.Join(Dirs(Order), ", "))
	}
	return nil
}

// CheckExists returns nil if dir names a stage whose directory exists under
// root, and otherwise an ErrName error naming it and the valid choices.
func CheckExists(root, dir string) error {
	dir = Clean(dir)
	if err := CheckKnown(dir); err != nil {
		return err
	}
	for _, s := range Existing(root) {
		if s.Dir == dir {
			return nil
		}
	}
	return nameErrorf("stage %s does not exist under %s yet; existing stages: %s",
		dir, root, orNone(Dirs(Existing(root))))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
