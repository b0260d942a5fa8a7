package stages

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/fixture"
)

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three fixture stages")
	}
	tests := []struct {
		name   string
		stages []string
		edit   func(t *testing.T, root string)
		want   []string
	}{
		{
			name:   "well formed",
			stages: []string{"stage0-mailbox", "stage1-ring"},
		},
		{
			name:   "successor drops a benchmark",
			stages: []string{"stage0-mailbox", "stage1-ring", "stage2-fence"},
			want:   []string{"stage2-fence: benchmark Fill/size=64B of its predecessor stage1-ring is missing (a name, once introduced, stays)"},
		},
		{
			name:   "go.mod and go.work broken",
			stages: []string{"stage0-mailbox", "stage1-ring"},
			edit: func(t *testing.T, root string) {
				writeFile(t, root, "stage1-ring/go.mod", "module softgpu/stage1-ring\n\ngo 1.26\n\nrequire softgpu/stage0-mailbox v0.0.0\n\nreplace softgpu/stage0-mailbox => ../stage0-mailbox\n")
				writeFile(t, root, "go.work", "go 1.26\n\nuse ./stage0-mailbox\n")
				require.NoError(t, os.MkdirAll(filepath.Join(root, "stage3-pinned"), 0o755))
			},
			want: []string{
				"stage1-ring/go.mod: requires softgpu/stage0-mailbox; a stage may depend on no other module of this repository",
				"stage1-ring/go.mod: replaces softgpu/stage0-mailbox with ../stage0-mailbox; a stage must build on its own (GOWORK=off)",
				"stage3-pinned: no go.mod: stat " + "ROOT/stage3-pinned/go.mod: no such file or directory",
				"stage3-pinned exists but its predecessor in build order, stage2-fence, does not",
				"go.work: does not use ./stage1-ring (run: go work use ./stage1-ring)",
				"go.work: does not use ./stage3-pinned (run: go work use ./stage3-pinned)",
				"stage1-ring: cannot list its benchmarks: BUILD",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fixture.Repo(t, tt.stages...)
			if tt.edit != nil {
				tt.edit(t, root)
			}
			got, err := Check(context.Background(), root, nil)
			require.NoError(t, err)
			// Messages from go and the file system vary; compare their start.
			for i := range got {
				if i < len(tt.want) {
					got[i] = abbreviate(got[i], tt.want[i], root)
				}
			}
			assert.Equal(t, tt.want, got, "Check()")
		})
	}
}

// abbreviate replaces root in got by ROOT and, where want ends in BUILD,
// whatever got says after the same prefix.
func abbreviate(got, want, root string) string {
	if prefix, ok := strings.CutSuffix(want, "BUILD"); ok && strings.HasPrefix(got, prefix) {
		return want
	}
	return strings.ReplaceAll(got, root, "ROOT")
}
