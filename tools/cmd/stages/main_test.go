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

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		stages     []string // fixture stages
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
		slow       bool // builds fixture stages
	}{
		{name: "no command", stages: []string{"stage0-mailbox"}, wantCode: cli.ExitUsage, wantStderr: []string{"usage:"}},
		{name: "unknown command", stages: []string{"stage0-mailbox"}, args: []string{"frob"}, wantCode: cli.ExitUsage, wantStderr: []string{`unknown command "frob"`}},
		{name: "help", stages: []string{"stage0-mailbox"}, args: []string{"help"}, wantCode: cli.ExitOK, wantStdout: []string{"forward [-check] STAGE"}},
		{
			name: "list", stages: []string{"stage0-mailbox", "stage1-ring"}, args: []string{"list"}, wantCode: cli.ExitOK,
			wantStdout: []string{"1      stage0-mailbox  -               yes", "2      stage1-ring     stage0-mailbox  yes", "6      stage7-idle     stage4-nolock   no"},
		},
		{name: "list takes no arguments", stages: []string{"stage0-mailbox"}, args: []string{"list", "x"}, wantCode: cli.ExitUsage, wantStderr: []string{"wrong number of arguments"}},
		{
			name: "diff stat, flag last", stages: []string{"stage0-mailbox", "stage1-ring"}, args: []string{"diff", "stage0-mailbox", "stage1-ring", "-stat"}, wantCode: cli.ExitOK,
			wantStdout: []string{"bench_test.go | ", "1 file changed"},
		},
		{
			name: "diff against the predecessor", stages: []string{"stage0-mailbox", "stage1-ring"}, args: []string{"diff", "stage1-ring"}, wantCode: cli.ExitOK,
			wantStdout: []string{"+func BenchmarkFillStream(b *testing.B) {"},
		},
		{name: "diff first stage alone", stages: []string{"stage0-mailbox"}, args: []string{"diff", "stage0-mailbox"}, wantCode: cli.ExitUsage, wantStderr: []string{"no predecessor"}},
		{name: "diff unknown stage", stages: []string{"stage0-mailbox"}, args: []string{"diff", "stage0-mailbox", "stage1"}, wantCode: cli.ExitUsage, wantStderr: []string{"stages are: stage0-mailbox, stage1-ring"}},
		{name: "diff missing stage", stages: []string{"stage0-mailbox"}, args: []string{"diff", "stage1-ring"}, wantCode: cli.ExitUsage, wantStderr: []string{"stage1-ring does not exist"}},
		{
			name: "new", stages: []string{"stage0-mailbox"}, args: []string{"new", "stage1-ring"}, wantCode: cli.ExitOK,
			wantStdout: []string{"made stage1-ring from stage0-mailbox (3 files, module path renamed to softgpu/stage1-ring)"},
		},
		{name: "new existing", stages: []string{"stage0-mailbox"}, args: []string{"new", "stage0-mailbox"}, wantCode: cli.ExitFailed, wantStderr: []string{"no predecessor"}},
		{name: "forward without git", stages: []string{"stage0-mailbox", "stage1-ring"}, args: []string{"forward", "stage0-mailbox"}, wantCode: cli.ExitFailed, wantStderr: []string{"git diff HEAD"}},
		{name: "check ok", stages: []string{"stage0-mailbox", "stage1-ring"}, args: []string{"check"}, wantCode: cli.ExitOK, wantStdout: []string{"stages check: ok (2 stages)"}, slow: true},
		{
			name: "check fails", stages: []string{"stage0-mailbox", "stage1-ring", "stage2-fence"}, args: []string{"check"}, wantCode: cli.ExitFailed,
			wantStdout: []string{"stages check: 1 problem:", "stage2-fence: benchmark Fill/size=64B of its predecessor stage1-ring is missing"}, slow: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.slow && testing.Short() {
				t.Skip("builds fixture stages")
			}
			root := fixture.Repo(t, tt.stages...)
			t.Chdir(root)
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("stages %q = exit %d; want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stages %q stdout lacks %q:\n%s", tt.args, want, stdout.String())
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stages %q stderr lacks %q:\n%s", tt.args, want, stderr.String())
				}
			}
		})
	}
}

func TestRunNoRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(dir, "empty"))
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"list"}, &stdout, &stderr); code != cli.ExitFailed || !strings.Contains(stderr.String(), "no go.work") {
		t.Errorf("stages list outside a repository = exit %d, %q; want exit %d and a go.work message", code, stderr.String(), cli.ExitFailed)
	}
}
