package exercises

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
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
