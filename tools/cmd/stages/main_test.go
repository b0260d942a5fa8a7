package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
)

const allStages = "stage0-mailbox, stage1-ring, stage2-fence, stage3-pinned, stage4-nolock, stage7-idle, stage5-vm, stage6-runlist, stage8-managed, stage9-chardev"

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		stages     []string // fixture stages
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string // for misuse: the one line, in full
		slow       bool   // builds fixture stages
	}{
		{name: "no command", args: nil, wantCode: cli.ExitUsage,
			wantStderr: "stages: no command given; want one of list, diff, new, forward, check\n"},
		{name: "unknown command", args: []string{"frob"}, wantCode: cli.ExitUsage,
			wantStderr: "stages: unknown command \"frob\"; want one of list, diff, new, forward, check\n"},
		{name: "help", args: []string{"help"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages COMMAND", "forward [-check] STAGE"}},
		{name: "-h", args: []string{"-h"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages COMMAND"}},
		{name: "list -h", args: []string{"list", "-h"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages list\n\nPrints the ten stages"}},
		{name: "diff -help", args: []string{"diff", "-help"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages diff", "-path PATH", "-stat"}},
		{name: "new -h", args: []string{"new", "-h"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages new STAGE"}},
		{name: "forward -h", args: []string{"forward", "stage0-mailbox", "-h"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages forward [-check] STAGE", "-check"}},
		{name: "check -h", args: []string{"check", "-h"}, wantCode: cli.ExitOK, wantStdout: []string{"usage: go run ./tools/cmd/stages check"}},
		{
			name: "list", args: []string{"list"}, wantCode: cli.ExitOK,
			wantStdout: []string{"1      stage0-mailbox  -               yes", "2      stage1-ring     stage0-mailbox  yes", "6      stage7-idle     stage4-nolock   no"},
		},
		{name: "list takes no arguments", args: []string{"list", "x"}, wantCode: cli.ExitUsage,
			wantStderr: "stages list: want no arguments, got [\"x\"]\n"},
		{name: "list bad flag", args: []string{"list", "-v"}, wantCode: cli.ExitUsage,
			wantStderr: "stages list: flag provided but not defined: -v\n"},
		{
			name: "diff stat, flag last", args: []string{"diff", "stage0-mailbox", "stage1-ring", "-stat"}, wantCode: cli.ExitOK,
			wantStdout: []string{"README.md     | ", "bench_test.go | ", "2 files changed"},
		},
		{
			name: "diff against the predecessor", args: []string{"diff", "stage1-ring"}, wantCode: cli.ExitOK,
			wantStdout: []string{"+func BenchmarkFillStream(b *testing.B) {"},
		},
		{
			name: "diff a path, after the stage", args: []string{"diff", "stage1-ring", "bench_test.go", "-stat"}, wantCode: cli.ExitOK,
			wantStdout: []string{"bench_test.go | ", "1 file changed"},
		},
		{
			name: "diff -path, two stages", args: []string{"diff", "-path", "softgpu.go", "stage0-mailbox", "stage1-ring", "-stat"}, wantCode: cli.ExitOK,
			wantStdout: []string{" 0 files changed"},
		},
		{name: "diff a path that matches nothing", args: []string{"diff", "stage1-ring", "driver"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: path \"driver\" matches no file of stage0-mailbox or stage1-ring\n"},
		{
			name: "diff stages with a trailing slash", args: []string{"diff", "stage0-mailbox/", "stage1-ring/", "-stat"}, wantCode: cli.ExitOK,
			wantStdout: []string{"2 files changed"},
		},
		{name: "diff missing stage with a trailing slash", stages: []string{"stage0-mailbox"}, args: []string{"diff", "stage1-ring/"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: stage stage1-ring does not exist under ROOT yet; existing stages: stage0-mailbox\n"},
		{name: "forward with a trailing slash", args: []string{"forward", "stage0-mailbox/"}, wantCode: cli.ExitFailed, wantStderr: "*git diff HEAD"},
		{name: "diff unknown stage", args: []string{"diff", "nosuch"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: unknown stage \"nosuch\"; stages are: " + allStages + "\n"},
		{name: "diff misspelt second stage", args: []string{"diff", "stage0-mailbox", "stage1-rng"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: unknown stage \"stage1-rng\"; stages are: " + allStages + "\n"},
		{name: "diff first stage alone", args: []string{"diff", "stage0-mailbox"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: stage0-mailbox is the first stage in build order and has no predecessor; name both stages: diff A B\n"},
		{name: "diff missing stage", stages: []string{"stage0-mailbox"}, args: []string{"diff", "stage1-ring"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: stage stage1-ring does not exist under ROOT yet; existing stages: stage0-mailbox\n"},
		{name: "diff no stage", args: []string{"diff"}, wantCode: cli.ExitUsage,
			wantStderr: "stages diff: want [A] B [PATH...], got none\n"},
		{
			name: "new", stages: []string{"stage0-mailbox"}, args: []string{"new", "stage1-ring"}, wantCode: cli.ExitOK,
			wantStdout: []string{"made stage1-ring from stage0-mailbox (5 files, module path renamed to softgpu/stage1-ring, README retitled)"},
		},
		{name: "new unknown", args: []string{"new", "nosuch"}, wantCode: cli.ExitUsage,
			wantStderr: "stages new: unknown stage \"nosuch\"; stages are: " + allStages + "\n"},
		{name: "new first stage", args: []string{"new", "stage0-mailbox"}, wantCode: cli.ExitUsage,
			wantStderr: "stages new: stage0-mailbox is the first stage in build order and has no predecessor to copy\n"},
		{name: "new existing", args: []string{"new", "stage1-ring"}, wantCode: cli.ExitUsage,
			wantStderr: "stages new: ROOT/stage1-ring already exists\n"},
		{name: "new without predecessor", args: []string{"new", "stage3-pinned"}, wantCode: cli.ExitUsage,
			wantStderr: "stages new: stage3-pinned is made from its predecessor stage2-fence, which does not exist under ROOT yet\n"},
		{name: "new two stages", args: []string{"new", "stage2-fence", "stage3-pinned"}, wantCode: cli.ExitUsage,
			wantStderr: "stages new: want one stage, got [\"stage2-fence\" \"stage3-pinned\"]\n"},
		{name: "forward unknown", args: []string{"forward", "nosuch"}, wantCode: cli.ExitUsage,
			wantStderr: "stages forward: unknown stage \"nosuch\"; stages are: " + allStages + "\n"},
		{name: "forward without git", args: []string{"forward", "stage0-mailbox"}, wantCode: cli.ExitFailed, wantStderr: "*git diff HEAD"},
		{name: "check ok", args: []string{"check"}, wantCode: cli.ExitOK, wantStdout: []string{"stages check: ok (2 stages)"}, slow: true},
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
			if tt.stages == nil {
				tt.stages = []string{"stage0-mailbox", "stage1-ring"}
			}
			root := fixture.Repo(t, tt.stages...)
			t.Chdir(root)
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			checkRun(t, tt.args, code, stdout.String(), stderr.String(), tt.wantCode, tt.wantStdout, strings.ReplaceAll(tt.wantStderr, "ROOT", root))
			if tt.name == "new" {
				readme, err := os.ReadFile(filepath.Join(root, "stage1-ring", "README.md"))
				if err != nil || !strings.HasPrefix(string(readme), "# stage1-ring\n") {
					t.Errorf("new stage1-ring/README.md = %q, %v; want it titled # stage1-ring", readme, err)
				}
			}
		})
	}
}

// checkRun compares one run with what a test wants. wantStderr is the whole
// of stderr, or, starting with "*", a part of it.
func checkRun(t *testing.T, args []string, code int, stdout, stderr string, wantCode int, wantStdout []string, wantStderr string) {
	t.Helper()
	assert.Equal(t, wantCode, code, "stages %q = exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	for _, want := range wantStdout {
		if !strings.Contains(stdout, want) {
			t.Errorf("stages %q stdout lacks %q:\n%s", args, want, stdout)
		}
	}
	if part, ok := strings.CutPrefix(wantStderr, "*"); ok {
		if !strings.Contains(stderr, part) {
			t.Errorf("stages %q stderr lacks %q:\n%s", args, part, stderr)
		}
	} else if wantStderr != "" && stderr != wantStderr {
		t.Errorf("stages %q stderr =\n%q\nwant\n%q", args, stderr, wantStderr)
	}
	if wantCode == cli.ExitOK && strings.Contains(strings.Join(args, " "), "-h") && stderr != "" {
		t.Errorf("stages %q -h wrote to stderr: %q", args, stderr)
	}
}

// TestRunUntracked checks that diff and forward refuse a stage holding a
// file git neither tracks nor ignores, naming it, and that a file the
// repository's .gitignore covers (a benchmark output saved as the stage
// READMEs once said) does not count.
func TestRunUntracked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	gitignore, err := os.ReadFile("../../../.gitignore")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, ".gitignore"), gitignore, 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "fixture"}} {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	t.Chdir(root)
	for _, ignored := range []string{"stage1-ring/s1.txt", "stage1-ring/cpu.prof", "stage1-ring/mem.pprof", "stage1-ring/softgpu.test"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, ignored), []byte("benchmark output"), 0o644))
	}
	tests := []struct {
		name       string
		args       []string
		stray      string // a file to leave in the tree; "" for none
		wantCode   int
		wantStderr string
	}{
		{"ignored outputs do not count", []string{"diff", "stage1-ring", "-stat"}, "", cli.ExitOK, ""},
		{"diff refuses a stray file in B", []string{"diff", "stage1-ring"}, "stage1-ring/notes.md", cli.ExitFailed,
			"*stages diff: untracked file stage1-ring/notes.md: not part of any stage"},
		{"diff refuses a stray file in A", []string{"diff", "stage0-mailbox", "stage1-ring"}, "stage0-mailbox/driver/tmp.go", cli.ExitFailed,
			"*untracked file stage0-mailbox/driver/tmp.go"},
		{"forward -check refuses", []string{"forward", "-check", "stage0-mailbox"}, "stage0-mailbox/new.go", cli.ExitFailed,
			"*stages forward: untracked file stage0-mailbox/new.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.stray != "" {
				p := filepath.Join(root, tt.stray)
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				require.NoError(t, os.WriteFile(p, []byte("stray\n"), 0o644))
				defer os.Remove(p)
			}
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			checkRun(t, tt.args, code, stdout.String(), stderr.String(), tt.wantCode, nil, tt.wantStderr)
			if tt.wantCode != cli.ExitOK && stdout.Len() > 0 {
				t.Errorf("a refused %q printed a diff:\n%s", tt.args, stdout.String())
			}
		})
	}
}

func TestRunNoRoot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
	t.Chdir(filepath.Join(dir, "empty"))
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"list"}, &stdout, &stderr); code != cli.ExitFailed || !strings.HasPrefix(stderr.String(), "stages list: no go.work") {
		t.Errorf("stages list outside a repository = exit %d, %q; want exit %d and a go.work message", code, stderr.String(), cli.ExitFailed)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"diff", "-h"}, &stdout, &stderr); code != cli.ExitOK {
		t.Errorf("stages diff -h outside a repository = exit %d, %q; want the usage", code, stderr.String())
	}
}
