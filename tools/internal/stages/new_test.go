package stages

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
	"softgpu/tools/internal/fixture"
)

func TestNewStage(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "stage1-ring")))
	writeFile(t, root, "stage0-mailbox/softgpu.test", "ignored binary") // must not be copied

	n, err := NewStage(context.Background(), root, "stage1-ring")
	require.NoError(t, err, "NewStage(stage1-ring)")
	got, err := readTree(root, "stage1-ring")
	require.NoError(t, err)
	want, err := readTree("testdata/new-want", "stage1-ring")
	require.NoError(t, err)
	assert.Equal(t, len(want), n, "NewStage(stage1-ring) copied %d files", n)
	require.Equal(t, len(want), len(got), "new stage1-ring has files %v; want %v", paths(got), paths(want))
	for i := range want {
		if got[i].Path != want[i].Path || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("new stage1-ring/%s = %q; want %s = %q", got[i].Path, got[i].Data, want[i].Path, want[i].Data)
		}
	}

	work, err := readGoWork(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	var uses []string
	for _, u := range work.Use {
		uses = append(uses, u.DiskPath)
	}
	if !slices.Contains(uses, "./stage1-ring") {
		t.Errorf("go.work uses %q after NewStage; want ./stage1-ring among them", uses)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".stage1-ring.new*"))
	assert.Equal(t, 0, len(leftovers), "NewStage left temporary directories %q", leftovers)
}

func TestNewStageErrors(t *testing.T) {
	tests := []struct {
		name string
		dir  string
	}{
		{"unknown", "stage10-quantum"},
		{"first stage has no predecessor", "stage0-mailbox"},
		{"already exists", "stage1-ring"},
		{"predecessor missing", "stage3-pinned"},
	}
	root := fixture.CopyTree(t, "testdata/tree")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewStage(context.Background(), root, tt.dir)
			if !errors.Is(err, ErrName) || !strings.Contains(err.Error(), tt.dir) {
				t.Errorf("NewStage(%s) = %v; want an ErrName error naming it", tt.dir, err)
			}
		})
	}
}

func TestRetitle(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"title is the stage", "# stage3-pinned\n\nA copy of stage3-pinned.\n", "# stage4-nolock\n\nA copy of stage3-pinned.\n"},
		{"title names the stage", "# stage3-pinned: pinned memory\r\ntext\r\n", "# stage4-nolock: pinned memory\r\ntext\r\n"},
		{"title without the name", "# Pinned memory\n\n## stage3-pinned\n", "# stage4-nolock\n\n## stage3-pinned\n"},
		{"only the first heading", "intro\n# stage3-pinned\n# stage3-pinned again\n", "intro\n# stage4-nolock\n# stage3-pinned again\n"},
		{"no heading", "stage3-pinned\n", "stage3-pinned\n"},
		{"no newline at the end", "# stage3-pinned", "# stage4-nolock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Retitle(tt.in, "stage3-pinned", "stage4-nolock"), "Retitle(%q)", tt.in)
		})
	}
}

func paths(files []treeFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// TestNewStageInGit checks a stage made in a git work tree is added to the
// index with intent to add, so that `stages diff` and `stages forward`,
// which refuse untracked files, take the new stage at once.
func TestNewStageInGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := fixture.CopyTree(t, "testdata/tree")
	require.NoError(t, os.RemoveAll(filepath.Join(root, "stage1-ring")))
	runGit(t, root, "init", "-q")
	runGit(t, root, "add", "-A")
	runGit(t, root, "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "tree")
	ctx := context.Background()
	_, err := NewStage(ctx, root, "stage1-ring")
	require.NoError(t, err, "NewStage(stage1-ring)")
	if err := CheckTracked(ctx, root, "stage0-mailbox", "stage1-ring"); err != nil {
		t.Errorf("CheckTracked after NewStage(stage1-ring) = %v; want nil", err)
	}
}
