package stages

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

func TestRename(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"import", `import "softgpu/stage1-ring/driver"`, `import "softgpu/STAGE/driver"`},
		{"go.mod", "module softgpu/stage1-ring\n", "module softgpu/STAGE\n"},
		{"end of sentence", "use softgpu/stage1-ring.", "use softgpu/STAGE."},
		{"longer name kept", "softgpu/stage1-ringx and softgpu/stage1-ring-2", "softgpu/stage1-ringx and softgpu/stage1-ring-2"},
		{"prefix kept", "mysoftgpu/stage1-ring", "mysoftgpu/stage1-ring"},
		{"prose kept", "a copy of stage1-ring", "a copy of stage1-ring"},
		{"twice", "softgpu/stage1-ring softgpu/stage1-ring/abi", "softgpu/STAGE softgpu/STAGE/abi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Normalise(tt.in, "stage1-ring"), "Normalise(%q, stage1-ring)", tt.in)
		})
	}
}

func TestDiffStagesFiles(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	// Ignored by the fixture's .gitignore: must not show up.
	writeFile(t, root, "stage0-mailbox/softgpu.test", "old binary")
	writeFile(t, root, "stage1-ring/softgpu.test", "new binary")
	writeFile(t, root, "stage1-ring/.git/HEAD", "ref: refs/heads/main\n")
	// An exercise's checker belongs to its stage alone: not in the diff.
	writeFile(t, root, "stage0-mailbox/driver/exercise_1_test.go", "//go:build exercise\n")

	d, err := DiffStages(root, "stage0-mailbox", "stage1-ring")
	require.NoError(t, err)
	want := []FileDiff{
		{Path: "README.md", Status: "modified", Added: 2, Removed: 2}, // title, and the newline at the end
		{Path: "driver/driver.go", Status: "modified", Added: 4, Removed: 4},
		{Path: "driver/ring.go", Status: "added", Added: 11},
		{Path: "old.go", Status: "removed", Removed: 4},
	}
	assert.Equal(t, want, d.Files, "DiffStages(stage0-mailbox, stage1-ring).Files")
	for _, leak := range []string{"stage0-mailbox/driver", "stage1-ring/driver", "softgpu.test", "exercise_1"} {
		if strings.Contains(d.Unified, leak) {
			t.Errorf("Unified contains %q; module paths must be normalised and ignored files skipped", leak)
		}
	}
	golden(t, "testdata/tree.diff", d.Unified)
	golden(t, "testdata/tree.stat", d.Stat())
}

func TestDiffStagesIdentical(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	d, err := DiffStages(root, "stage0-mailbox", "stage0-mailbox")
	require.NoError(t, err)
	if len(d.Files) != 0 || d.Unified != "" {
		t.Errorf("DiffStages(x, x) = %d files, %q; want none", len(d.Files), d.Unified)
	}
	assert.Equal(t, " 0 files changed\n", d.Stat(), "Stat()")
}

func TestDiffStagesMissing(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	_, err := DiffStages(root, "stage0-mailbox", "stage2-fence")
	assert.Error(t, err, "DiffStages(stage0-mailbox, stage2-fence) = nil error; want one for the missing directory")
}

// TestDiffStagesApplies checks that Unified is a real patch: git apply puts
// it on a normalised copy of A and the result is a normalised B.
func TestDiffStagesApplies(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := fixture.CopyTree(t, "testdata/tree")
	d, err := DiffStages(root, "stage0-mailbox", "stage1-ring")
	require.NoError(t, err)
	work := t.TempDir()
	filesA, err := readTree(root, "stage0-mailbox")
	require.NoError(t, err)
	for _, f := range filesA {
		writeFile(t, work, f.Path, Normalise(string(f.Data), "stage0-mailbox"))
	}
	cmd := exec.Command("git", "apply", "--unsafe-paths", "-")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader(d.Unified)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	filesB, err := readTree(root, "stage1-ring")
	require.NoError(t, err)
	for _, f := range filesB {
		assert.Equal(t, Normalise(string(f.Data), "stage1-ring"), readFile(t, work, f.Path), "patched %s", f.Path)
	}
	if _, err := os.Stat(filepath.Join(work, "old.go")); !os.IsNotExist(err) {
		t.Errorf("patched tree still has old.go (err %v)", err)
	}
}

func TestStatScales(t *testing.T) {
	d := &Diff{Files: []FileDiff{
		{Path: "big.go", Status: "added", Added: 200},
		{Path: "small.go", Status: "modified", Added: 1, Removed: 1},
		{Path: "logo.png", Status: "added", Binary: true},
	}}
	want := "" +
		" big.go   | 200 " + strings.Repeat("+", 50) + "\n" +
		" small.go |   2 +-\n" +
		" logo.png | Bin\n" +
		" 3 files changed, 201 insertions(+), 1 deletion(-)\n"
	assert.Equal(t, want, d.Stat(), "Stat()")
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "%v (run go test -update to create it)", err)
	assert.Equal(t, string(want), got, "output differs from %s (go test -update rewrites it)\nwant:\n%s", path, want)
}

func TestDiffPaths(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	tests := []struct {
		name      string
		paths     []string
		wantFiles []string
		wantErr   string
	}{
		{"everything", nil, []string{"README.md", "driver/driver.go", "driver/ring.go", "old.go"}, ""},
		{"a directory", []string{"driver"}, []string{"driver/driver.go", "driver/ring.go"}, ""},
		{"a directory, typed with slashes", []string{"./driver/"}, []string{"driver/driver.go", "driver/ring.go"}, ""},
		{"a file added", []string{"driver/ring.go"}, []string{"driver/ring.go"}, ""},
		{"a file removed", []string{"old.go"}, []string{"old.go"}, ""},
		{"two paths", []string{"README.md", "old.go"}, []string{"README.md", "old.go"}, ""},
		{"an unchanged file", []string{"softgpu.go"}, nil, ""},
		{"whole elements only", []string{"drive"}, nil, `path "drive" matches no file of stage0-mailbox or stage1-ring`},
		{"no such path", []string{"driver", "nosuch.go"}, nil, `path "nosuch.go" matches no file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DiffPaths(root, "stage0-mailbox", "stage1-ring", tt.paths)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrPath) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DiffPaths(%q) error = %v; want ErrPath %q", tt.paths, err, tt.wantErr)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, f := range d.Files {
				got = append(got, f.Path)
			}
			assert.Equal(t, tt.wantFiles, got, "DiffPaths(%q) files", tt.paths)
			for _, f := range got {
				if !strings.Contains(d.Unified, "diff --git a/"+f+" ") {
					t.Errorf("DiffPaths(%q).Unified lacks %s", tt.paths, f)
				}
			}
			assert.Equal(t, len(got), strings.Count(d.Unified, "diff --git"), "DiffPaths(%q).Unified has files outside the paths:\n%s", tt.paths, d.Unified)
		})
	}
}
