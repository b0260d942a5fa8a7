package main

import (
	"context"
	"os"
	"path/filepath"
	"softgpu/tools/internal/cli"
	"strings"
	"testing"

	"softgpu/tools/internal/fixture"
)

func TestRunUsage(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	t.Chdir(root)
	tests := []struct {
		name     string
		args     []string
		wantText string
	}{
		{"no stage", nil, "want one or two stages"},
		{"three stages", []string{"stage0-mailbox", "stage1-ring", "stage2-fence"}, "want one or two stages"},
		{"first stage alone", []string{"stage0-mailbox"}, "first stage in build order"},
		{"unknown", []string{"stage1-rings"}, "stages are: stage0-mailbox"},
		{"missing", []string{"stage2-fence"}, "stage2-fence does not exist"},
		{"itself", []string{"stage1-ring", "stage1-ring"}, "with itself"},
		{"bad count", []string{"-count", "0", "stage1-ring"}, "-count 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != cli.ExitUsage || !strings.Contains(stderr.String(), tt.wantText) {
				t.Errorf("compare %q = exit %d, %q; want exit %d and %q", tt.args, code, stderr.String(), cli.ExitUsage, tt.wantText)
			}
		})
	}
}

// TestRunFixture compares two fixture stages for real and checks benchstat's
// table has both stages as columns, base first.
func TestRunFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fixture stages and benchstat")
	}
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	// benchstat comes from the tools module: give the fixture its go.mod.
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, "tools"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "tools", f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	saved := filepath.Join(t.TempDir(), "in.txt")
	var stdout, stderr strings.Builder
	args := []string{"-count", "2", "-benchtime", "20x", "-bench", "Fill", "-o", saved, "stage1-ring"}
	if code := run(context.Background(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("compare %q = exit %d:\n%s", args, code, stderr.String())
	}
	out := stdout.String()
	i, j := strings.Index(out, "stage0-mailbox"), strings.Index(out, "stage1-ring")
	if i < 0 || j < i || !strings.Contains(out, "vs base") {
		t.Errorf("benchstat output should have columns stage0-mailbox, then stage1-ring vs base:\n%s", out)
	}
	text, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "BenchmarkFill/size=64B"); n != 4 {
		t.Errorf("-o file has %d Fill results; want 4 (2 rounds × 2 stages)\n%s", n, text)
	}
}
