package stages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notes is a file long enough that changes near its top and its bottom
// land in separate hunks.
func notes(module, a, z string) string {
	var b strings.Builder
	b.WriteString("package softgpu\n\nimport \"" + module + "/abi\"\n\nconst A = " + a + "\n")
	for _, c := range "bcdefghijklmnop" {
		b.WriteString("const " + strings.ToUpper(string(c)) + " = 0\n")
	}
	b.WriteString("const Z = " + z + "\n\nvar _ = abi.X\n")
	return b.String()
}

// forwardRepo makes a git repository with three stages, commits it, then
// edits stage0-mailbox (both ends of notes.go, and a new file added with
// git add -N).
// stage2-fence has its own value of A, so the top hunk cannot apply there.
func forwardRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	writeFile(t, root, "go.work", "go 1.26\n")
	writeFile(t, root, ".gitignore", "*.test\n")
	for _, dir := range []string{"stage0-mailbox", "stage1-ring", "stage2-fence"} {
		a := "1"
		if dir == "stage2-fence" {
			a = "100"
		}
		writeFile(t, root, dir+"/go.mod", "module softgpu/"+dir+"\n\ngo 1.26\n")
		writeFile(t, root, dir+"/notes.go", notes("softgpu/"+dir, a, "26"))
	}
	runGit(t, root, "init", "-q")
	runGit(t, root, "add", "-A")
	runGit(t, root, "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "stages")

	writeFile(t, root, "stage0-mailbox/notes.go", notes("softgpu/stage0-mailbox", "2", "27"))
	writeFile(t, root, "stage0-mailbox/fix.go", "package softgpu\n\nimport _ \"softgpu/stage0-mailbox/abi\"\n")
	runGit(t, root, "add", "-N", "stage0-mailbox/fix.go") // a new file of the fix: known to git, not staged
	writeFile(t, root, "stage0-mailbox/fix.test", "ignored: not forwarded")
	writeFile(t, root, "stage0-mailbox/driver/exercise_1_test.go", "//go:build exercise\n\npackage driver\n")
	runGit(t, root, "add", "-N", "stage0-mailbox/driver/exercise_1_test.go") // a checker: known to git, never forwarded
	return root
}

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestForward(t *testing.T) {
	root := forwardRepo(t)
	results, err := Forward(context.Background(), root, "stage0-mailbox", false)
	require.NoError(t, err, "Forward(stage0-mailbox)")
	if got := forwardStages(results); !reflect.DeepEqual(got, []string{"stage1-ring", "stage2-fence"}) {
		t.Fatalf("Forward(stage0-mailbox) reached %q; want stage1-ring, stage2-fence", got)
	}

	// stage1-ring had the same code: everything applies, with its own path.
	assert.Equal(t, 0, len(results[0].Problems), "stage1-ring problems = %q", results[0].Problems)
	assert.Equal(t, notes("softgpu/stage1-ring", "2", "27"), readFile(t, root, "stage1-ring/notes.go"), "stage1-ring/notes.go")
	assert.Equal(t, "package softgpu\n\nimport _ \"softgpu/stage1-ring/abi\"\n", readFile(t, root, "stage1-ring/fix.go"), "stage1-ring/fix.go")
	if _, err := os.Stat(filepath.Join(root, "stage1-ring/fix.test")); !os.IsNotExist(err) {
		t.Errorf("ignored fix.test was forwarded (err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "stage1-ring/driver/exercise_1_test.go")); !os.IsNotExist(err) {
		t.Errorf("an exercise's checker was forwarded (err %v)", err)
	}

	// stage2-fence differs at the top: that hunk is rejected and reported,
	// the bottom one still applies.
	want := []string{"stage2-fence/notes.go: hunk #1 does not apply (left in stage2-fence/notes.go.rej)"}
	assert.Equal(t, want, results[1].Problems, "stage2-fence problems\ngit said:\n%s", results[1].Output)
	assert.Equal(t, notes("softgpu/stage2-fence", "100", "27"), readFile(t, root, "stage2-fence/notes.go"), "stage2-fence/notes.go")
	_, err = os.Stat(filepath.Join(root, "stage2-fence/notes.go.rej"))
	assert.NoError(t, err, "no .rej file for the rejected hunk")
}

func TestForwardCheck(t *testing.T) {
	root := forwardRepo(t)
	results, err := Forward(context.Background(), root, "stage0-mailbox", true)
	require.NoError(t, err, "Forward(stage0-mailbox, check)")
	if len(results) != 2 || len(results[0].Problems) != 0 || len(results[1].Problems) != 1 {
		t.Fatalf("Forward(check) = %+v; want stage1-ring clean and one problem in stage2-fence", results)
	}
	assert.Equal(t, "stage2-fence/notes.go: hunk at line 2 does not apply", results[1].Problems[0], "stage2-fence problem")
	if got, want := readFile(t, root, "stage1-ring/notes.go"), notes("softgpu/stage1-ring", "1", "26"); got != want {
		t.Errorf("check changed stage1-ring/notes.go to %q", got)
	}
}

func TestForwardErrors(t *testing.T) {
	root := forwardRepo(t)
	tests := []struct {
		name string
		dir  string
	}{
		{"unknown stage", "stage42-warp"},
		{"missing stage", "stage3-pinned"},
		{"no change", "stage1-ring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Forward(context.Background(), root, tt.dir, false)
			assert.Error(t, err, "Forward(%s)", tt.dir)
		})
	}
}

// TestForwardUntracked checks that a stray file (a benchmark output saved
// in the stage) stops Forward, with and without -check, before anything is
// applied, and that the message names it.
func TestForwardUntracked(t *testing.T) {
	for _, check := range []bool{false, true} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			root := forwardRepo(t)
			writeFile(t, root, "stage0-mailbox/s0.txt", "BenchmarkFill/size=64B-2 1000 812 ns/op\n")
			_, err := Forward(context.Background(), root, "stage0-mailbox", check)
			var untracked *UntrackedError
			if !errors.As(err, &untracked) || !reflect.DeepEqual(untracked.Files, []string{"stage0-mailbox/s0.txt"}) {
				t.Fatalf("Forward(stage0-mailbox) with a stray s0.txt = %v; want an UntrackedError naming stage0-mailbox/s0.txt", err)
			}
			if !strings.Contains(err.Error(), "untracked file stage0-mailbox/s0.txt") {
				t.Errorf("error %q does not name the file plainly", err)
			}
			assert.Equal(t, notes("softgpu/stage1-ring", "1", "26"), readFile(t, root, "stage1-ring/notes.go"), "a refused Forward changed stage1-ring/notes.go")
			if _, err := os.Stat(filepath.Join(root, "stage1-ring/s0.txt")); !os.IsNotExist(err) {
				t.Errorf("the stray file was forwarded (err %v)", err)
			}
		})
	}
}

func forwardStages(results []ForwardResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Stage)
	}
	return out
}
