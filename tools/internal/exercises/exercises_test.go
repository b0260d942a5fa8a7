package exercises

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// write creates the file root/rel with data, and its directories.
func write(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	write(t, root, "stage5-vm/driver/exercise_1_test.go", "//go:build exercise\n\npackage driver\n\nfunc TestExercise5_1(t *testing.T) {}\n")
	write(t, root, "stage5-vm/device/exercise_4_test.go", "//go:build exercise\n\npackage device\n\nfunc TestExercise5_4(t *testing.T) {}\n")
	write(t, root, "stage9-chardev/server/exercise_1_test.go", "package server\n\nfunc TestExercise9_2(t *testing.T) {}\n")
	write(t, root, "stage0-mailbox/exercise_2_test.go", "//go:build exercise\n\npackage softgpu\n\nfunc TestExercise0_2(t *testing.T) {}\n")
	write(t, root, "book/solutions/stage5-vm/1.patch", "")
	write(t, root, "book/solutions/stage5-vm/4.patch", "")
	write(t, root, "book/solutions/stage5-vm/7.patch", "")
	write(t, root, "book/solutions/stage5-vm/notes.txt", "")
	write(t, root, "book/solutions/stage9-chardev/1.patch", "")

	got, problems, err := Find(root)
	require.NoError(t, err)
	want := []Exercise{
		{Stage: "stage9-chardev", N: 1, Checker: "server/exercise_1_test.go", Solution: "book/solutions/stage9-chardev/1.patch"},
	}
	// Build order: stage 5 comes after stage 7, stage 9 last; stage 0's
	// checker has no solution, so it is a problem and not an exercise.
	want = append([]Exercise{
		{Stage: "stage5-vm", N: 1, Checker: "driver/exercise_1_test.go", Solution: "book/solutions/stage5-vm/1.patch"},
		{Stage: "stage5-vm", N: 4, Checker: "device/exercise_4_test.go", Solution: "book/solutions/stage5-vm/4.patch"},
	}, want...)
	if !slices.Equal(got, want) {
		t.Errorf("Find: exercises\n got %v\nwant %v", got, want)
	}
	wantProblems := []string{
		"book/solutions/stage5-vm/7.patch: a solution with no checker (want exercise_7_test.go in the package it changes)",
		"book/solutions/stage5-vm/notes.txt: not a solution's name (want <n>.patch)",
		"stage0-mailbox/exercise_2_test.go: a checker with no solution (want book/solutions/stage0-mailbox/2.patch)",
		"stage9-chardev/server/exercise_1_test.go: declares no TestExercise9_1(t *testing.T)",
		`stage9-chardev/server/exercise_1_test.go: its first line is "package server"; want //go:build exercise (a checker fails on the untouched stage, so it must stay out of go test)`,
	}
	if !slices.Equal(problems, wantProblems) {
		t.Errorf("Find: problems\n got %q\nwant %q", problems, wantProblems)
	}
	assert.Equal(t, "TestExercise5_1", got[0].Test(), "Test()")
	assert.Equal(t, "./driver", got[0].Pkg(), "Pkg()")
	assert.Equal(t, ".", (Exercise{Checker: "exercise_3_test.go"}).Pkg(), "Pkg() of a checker at the stage's top")
}

func TestPackages(t *testing.T) {
	patch := `diff --git a/channel.go b/channel.go
--- a/channel.go
+++ b/channel.go
diff --git a/driver/priority.go b/driver/priority.go
new file mode 100644
--- /dev/null
+++ b/driver/priority.go
diff --git a/include/softgpu_uapi.h b/include/softgpu_uapi.h
--- a/include/softgpu_uapi.h
+++ b/include/softgpu_uapi.h
diff --git a/uapi/gone.go b/uapi/gone.go
deleted file mode 100644
--- a/uapi/gone.go
+++ /dev/null
`
	got := Packages(patch)
	want := []string{".", "./driver", "./uapi"}
	if !slices.Equal(got, want) {
		t.Errorf("Packages = %q; want %q", got, want)
	}
}

func TestStageNumber(t *testing.T) {
	for dir, want := range map[string]int{"stage0-mailbox": 0, "stage9-chardev": 9, "stage5-vm": 5} {
		assert.Equal(t, want, StageNumber(dir), "StageNumber(%q)", dir)
	}
}
