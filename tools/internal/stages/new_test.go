package stages

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"softgpu/tools/internal/fixture"
)

func TestNewStage(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	if err := os.RemoveAll(filepath.Join(root, "stage1-ring")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "stage0-mailbox/softgpu.test", "ignored binary") // must not be copied

	n, err := NewStage(context.Background(), root, "stage1-ring")
	if err != nil {
		t.Fatalf("NewStage(stage1-ring): %v", err)
	}
	got, err := readTree(root, "stage1-ring")
	if err != nil {
		t.Fatal(err)
	}
	want, err := readTree("testdata/new-want", "stage1-ring")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("NewStage(stage1-ring) copied %d files; want %d", n, len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("new stage1-ring has files %v; want %v", paths(got), paths(want))
	}
	for i := range want {
		if got[i].Path != want[i].Path || string(got[i].Data) != string(want[i].Data) {
			t.Errorf("new stage1-ring/%s = %q; want %s = %q", got[i].Path, got[i].Data, want[i].Path, want[i].Data)
		}
	}

	work, err := readGoWork(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	var uses []string
	for _, u := range work.Use {
		uses = append(uses, u.DiskPath)
	}
	if !slices.Contains(uses, "./stage1-ring") {
		t.Errorf("go.work uses %q after NewStage; want ./stage1-ring among them", uses)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".stage1-ring.new*"))
	if len(leftovers) != 0 {
		t.Errorf("NewStage left temporary directories %q", leftovers)
	}
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
			if got := Retitle(tt.in, "stage3-pinned", "stage4-nolock"); got != tt.want {
				t.Errorf("Retitle(%q) = %q; want %q", tt.in, got, tt.want)
			}
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
