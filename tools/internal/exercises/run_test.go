package exercises

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureStage writes a one-package stage whose F returns 1, a checker
// that wants want from it, and a solution that makes F return 2.
func fixtureStage(t *testing.T, want string) (string, Exercise) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	write(t, root, "stage0-mailbox/go.mod", "module softgpu/stage0-mailbox\n\ngo 1.26\n")
	write(t, root, "stage0-mailbox/f.go", "package softgpu\n\n// F is what the exercise changes.\nfunc F() int { return 1 }\n")
	write(t, root, "stage0-mailbox/f_test.go", "package softgpu\n\nimport \"testing\"\n\nfunc TestFPositive(t *testing.T) {\n\tif F() <= 0 {\n\t\tt.Fatal(\"F() <= 0\")\n\t}\n}\n")
	write(t, root, "stage0-mailbox/exercise_1_test.go", "//go:build exercise\n\npackage softgpu\n\nimport \"testing\"\n\nfunc TestExercise0_1(t *testing.T) {\n\tif F() != "+want+" {\n\t\tt.Fatalf(\"F() = %d; want "+want+"\", F())\n\t}\n}\n")
	write(t, root, "book/solutions/stage0-mailbox/1.patch", `diff --git a/f.go b/f.go
--- a/f.go
+++ b/f.go
@@ -1,4 +1,4 @@
 package softgpu
 
 // F is what the exercise changes.
-func F() int { return 1 }
+func F() int { return 2 }
`)
	all, problems, err := Find(root)
	if err != nil || len(problems) > 0 || len(all) != 1 {
		t.Fatalf("Find = %v, %q, %v; want one exercise", all, problems, err)
	}
	return root, all[0]
}

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command three times")
	}
	for _, tt := range []struct {
		name, want string
		err        string // "" for success
	}{
		{"a checker that fails, then passes", "2", ""},
		{"a checker that passes on the untouched stage", "1", "PASSES on the untouched stage"},
		{"a checker the solution does not satisfy", "3", "FAILS with the reference solution"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, e := fixtureStage(t, tt.want)
			r := Run(context.Background(), root, e, []string{"GOFLAGS=-mod=mod"})
			switch {
			case tt.err == "" && r.Err != nil:
				t.Fatalf("Run = %v; want success\n%s", r.Err, r.Output)
			case tt.err != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tt.err) || !errors.Is(r.Err, ErrChecker)):
				t.Fatalf("Run = %v; want an ErrChecker saying %q", r.Err, tt.err)
			}
			if got, want := r.Packages, []string{"."}; tt.err == "" && !slices.Equal(got, want) {
				t.Errorf("Packages = %q; want %q", got, want)
			}
		})
	}
}

// TestReferenceSolutionsApply checks every solution in this repository
// against the stage it patches as it stands now. Run does the same on a
// copy, but only in CI's exercise step, minutes in; a change forwarded
// through the stages that moves a solution's context lines fails here,
// in go test work, instead.
func TestReferenceSolutionsApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Skipf("not inside the softgpu workspace (no %s/go.work)", root)
	}
	all, problems, err := Find(root)
	require.NoError(t, err)
	assert.Empty(t, problems, "Find's problems")
	require.NotEmpty(t, all, "the repository has exercises with solutions")
	for _, e := range all {
		// From the root with --directory: git apply run inside a
		// subdirectory of a repository skips, silently, every path
		// outside it, and a patch's paths are relative to its stage.
		apply := exec.Command("git", "apply", "--check", "--whitespace=nowarn", "--directory="+e.Stage, filepath.FromSlash(e.Solution))
		apply.Dir = root
		if msg, err := apply.CombinedOutput(); err != nil {
			t.Errorf("exercise %s: %s does not apply to %s as it stands (regenerate it against the stage): %v\n%s", e.Name(), e.Solution, e.Stage, err, msg)
		}
	}
}
