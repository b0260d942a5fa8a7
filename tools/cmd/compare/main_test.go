package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
)

const allStages = "stage0-mailbox, stage1-ring, stage2-fence, stage3-pinned, stage4-nolock, stage7-idle, stage5-vm, stage6-runlist, stage8-managed, stage9-chardev"

// TestRunUsage checks every misuse is refused before anything is built,
// with exit 2 and one line naming the bad input.
func TestRunUsage(t *testing.T) {
	root, file := fixture.MisuseRepo(t, "stage0-mailbox", "stage1-ring")
	tests := []struct {
		name       string
		args       []string
		wantStderr string // in full
	}{
		{"no stage", nil, "compare: want one or two stages, got 0 arguments []"},
		{"three stages", []string{"stage0-mailbox", "stage1-ring", "stage2-fence"},
			`compare: want one or two stages, got 3 arguments ["stage0-mailbox" "stage1-ring" "stage2-fence"]`},
		{"first stage alone", []string{"stage0-mailbox"},
			"compare: stage0-mailbox is the first stage in build order; name the stage to compare it with: compare stage0-mailbox OTHER"},
		{"unknown", []string{"stage9-nope"}, `compare: unknown stage "stage9-nope"; stages are: ` + allStages},
		{"unknown base", []string{"nosuch", "stage1-ring"}, `compare: unknown stage "nosuch"; stages are: ` + allStages},
		{"missing", []string{"stage2-fence"}, "compare: stage stage2-fence does not exist under " + root + " yet; existing stages: stage0-mailbox, stage1-ring"},
		{"itself", []string{"stage1-ring", "stage1-ring"}, "compare: comparing stage1-ring with itself"},
		{"itself, with a trailing slash", []string{"stage1-ring/", "stage1-ring"}, "compare: comparing stage1-ring with itself"},
		{"missing, with a trailing slash", []string{"stage2-fence/"}, "compare: stage stage2-fence does not exist under " + root + " yet; existing stages: stage0-mailbox, stage1-ring"},
		{"bad count", []string{"-count", "0", "stage1-ring"}, "compare: -count 0: want at least 1"},
		{"flag after the stage", []string{"stage1-ring", "-count", "0"}, "compare: -count 0: want at least 1"},
		{"bad benchtime", []string{"stage1-ring", "-benchtime", "1z"},
			`compare: invalid value "1z" for flag -benchtime: want a positive duration like 1s or 300ms, or a count of iterations like 100x`},
		{"zero benchtime", []string{"-benchtime", "0x", "stage1-ring"},
			`compare: invalid value "0x" for flag -benchtime: want a positive count of iterations like 100x, or a duration like 1s`},
		{"bad regexp", []string{"-bench", "(", "stage1-ring"}, "compare: -bench \"(\": error parsing regexp: missing closing ): `(`"},
		{"unknown flag", []string{"stage1-ring", "-fast"}, "compare: flag provided but not defined: -fast"},
		{"-o a directory", []string{"-o", root, "stage1-ring"}, "compare: -o " + root + ": " + root + " is a directory"},
		{"-o under a file", []string{"stage1-ring", "-o", filepath.Join(file, "out.txt")},
			"compare: -o " + filepath.Join(file, "out.txt") + ": cannot write " + filepath.Join(file, "out.txt") + ": " + file + " is not a directory"},
		{"-at with two stages", []string{"-at", "HEAD", "stage0-mailbox", "stage1-ring"},
			`compare: -at HEAD compares one stage with itself at that commit; got 2 stages ["stage0-mailbox" "stage1-ring"]`},
		{"-at outside git", []string{"-at", "HEAD", "stage1-ring"}, "compare: -at HEAD: " + root + " is not in a git repository"},
		{"-o in a missing directory", []string{"stage1-ring", "-o", filepath.Join(root, "nope", "out.txt")},
			"compare: -o " + filepath.Join(root, "nope", "out.txt") + ": cannot write " + filepath.Join(root, "nope", "out.txt") + ": " + filepath.Join(root, "nope") + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixture.CheckMisuse(t, "compare", run, tt.args, tt.wantStderr)
		})
	}
}

func TestRunHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help"} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), []string{"stage1-ring", arg}, &stdout, &stderr)
		if code != cli.ExitOK || !strings.HasPrefix(stdout.String(), "usage: go run ./tools/cmd/compare") ||
			!strings.Contains(stdout.String(), "-benchtime duration") || stderr.Len() != 0 {
			t.Errorf("compare %s = exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", arg, code, stdout.String(), stderr.String())
		}
	}
}

// TestRunFixture compares two fixture stages for real and checks benchstat's
// table has both stages as columns, base first, and that the run said how
// long it would take.
func TestRunFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fixture stages and benchstat")
	}
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	// benchstat comes from the tools module: give the fixture its go.mod.
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "tools"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "tools", f), data, 0o644))
	}
	t.Chdir(root)
	saved := filepath.Join(t.TempDir(), "in.txt")
	var stdout, stderr strings.Builder
	args := []string{"stage1-ring", "-count", "2", "-benchtime", "20x", "-bench", "Fill", "-o", saved}
	if code := run(context.Background(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("compare %q = exit %d:\n%s", args, code, stderr.String())
	}
	out := stdout.String()
	i, j := strings.Index(out, "stage0-mailbox"), strings.Index(out, "stage1-ring")
	if i < 0 || j < i || !strings.Contains(out, "vs base") {
		t.Errorf("benchstat output should have columns stage0-mailbox, then stage1-ring vs base:\n%s", out)
	}
	for _, want := range []string{
		"compare: stage0-mailbox: 1 benchmark, stage1-ring: 2 benchmarks; 2 rounds of -benchtime 20x: about ",
		"compare: round 1 of 2: stage0-mailbox (about ",
		"compare: round 2 of 2: stage0-mailbox (about ",
		" left)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("compare progress lacks %q:\n%s", want, stderr.String())
		}
	}
	text, err := os.ReadFile(saved)
	require.NoError(t, err)
	if n := strings.Count(string(text), "BenchmarkFill/size=64B"); n != 4 {
		t.Errorf("-o file has %d Fill results; want 4 (2 rounds × 2 stages)\n%s", n, text)
	}
	if fi, err := os.Stat(saved); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("-o file mode = %v, %v; want 0644", fi.Mode().Perm(), err)
	}
}

// gitRepo makes a fixture repository of stages with benchstat's go.mod in
// tools/, as TestRunFixture does, and commits what add names (every file
// if add is empty). It returns the root and the commit's short hash.
func gitRepo(t *testing.T, add []string, stages ...string) (root, short string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root = fixture.Repo(t, stages...)
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "tools"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "tools", f), data, 0o644))
	}
	if len(add) == 0 {
		add = []string{"."}
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %q: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git(append([]string{"add", "--"}, add...)...)
	git("-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "fixture")
	return root, git("rev-parse", "--short", "HEAD")
}

// TestRunAtUsage checks the -at misuse that needs a repository: a commit
// that is not there, and a stage the commit does not have.
func TestRunAtUsage(t *testing.T) {
	root, short := gitRepo(t, []string{"go.work", "tools", "stage0-mailbox"}, "stage0-mailbox", "stage1-ring")
	t.Chdir(root)
	fixture.CheckMisuse(t, "compare", run, []string{"-at", "nosuch", "stage0-mailbox"},
		"compare: -at nosuch: no such commit in the repository at "+root)
	fixture.CheckMisuse(t, "compare", run, []string{"-at", "HEAD", "stage1-ring"},
		"compare: -at HEAD: commit "+short+" has no stage stage1-ring")
	fixture.CheckMisuse(t, "compare", run, []string{"-at", "HEAD", "stage2-fence"},
		"compare: stage stage2-fence does not exist under "+root+" yet; existing stages: stage0-mailbox, stage1-ring")
}

// TestRunAtFixture compares a fixture stage as committed with the same
// stage changed in the working tree, for real: the committed column must
// come from the commit (it lacks the benchmark the working tree adds),
// come first, and be named stage@commit; and the working tree, index
// included, must be left as it was.
func TestRunAtFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fixture stages and benchstat")
	}
	root, short := gitRepo(t, nil, "stage0-mailbox", "stage1-ring")
	added := `package softgpu_test

import "testing"

func BenchmarkWorkingTreeOnly(b *testing.B) {
	for b.Loop() {
	}
}
`
	require.NoError(t, os.WriteFile(filepath.Join(root, "stage1-ring", "added_test.go"), []byte(added), 0o644))
	t.Chdir(root)
	saved := filepath.Join(t.TempDir(), "in.txt")
	var stdout, stderr strings.Builder
	args := []string{"-at", "HEAD", "stage1-ring", "-count", "2", "-benchtime", "20x", "-bench", "Fill$|WorkingTreeOnly", "-o", saved}
	if code := run(context.Background(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("compare %q = exit %d:\n%s", args, code, stderr.String())
	}
	committed := "stage1-ring@" + short
	out := stdout.String()
	i, j := strings.Index(out, committed), strings.Index(out, "stage1-ring ")
	if i < 0 || j < i || !strings.Contains(out, "vs base") {
		t.Errorf("benchstat output should have columns %s, then stage1-ring vs base:\n%s", committed, out)
	}
	for _, want := range []string{
		"compare: copying stage1-ring out of commit " + short + " (git archive)",
		"compare: building " + committed + " (go test -c, GOWORK=off)",
		"compare: building stage1-ring (go test -c, GOWORK=off)",
		"compare: " + committed + ": 1 benchmark, stage1-ring: 2 benchmarks; 2 rounds of -benchtime 20x: about ",
		"compare: round 1 of 2: " + committed + " (about ",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("compare progress lacks %q:\n%s", want, stderr.String())
		}
	}
	text, err := os.ReadFile(saved)
	require.NoError(t, err)
	if n := strings.Count(string(text), "stage: "+committed+"\n"); n != 2 {
		t.Errorf("-o file names %s in %d runs; want 2\n%s", committed, n, text)
	}
	if n := strings.Count(string(text), "BenchmarkWorkingTreeOnly"); n != 2 {
		t.Errorf("-o file has %d WorkingTreeOnly results; want 2, from the working tree's runs only\n%s", n, text)
	}
	status, err := exec.Command("git", "-C", root, "status", "--porcelain").CombinedOutput()
	require.NoError(t, err)
	require.Equal(t, "?? stage1-ring/added_test.go\n", string(status), "git status after compare -at")
}

// TestBenchstatRelativeInput runs benchstat on an input named relative to
// the working directory: benchstat runs in tools/, so a relative path must
// be made absolute first, or benchstat cannot open it (and says so on
// stderr, exiting 0).
func TestBenchstatRelativeInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go tool benchstat")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	t.Chdir(t.TempDir())
	text := "stage: a\nBenchmarkFill 10 100 ns/op\nstage: b\nBenchmarkFill 10 90 ns/op\n"
	require.NoError(t, os.WriteFile("in.txt", []byte(text), 0o644))
	var stdout, stderr strings.Builder
	if err := benchstat(context.Background(), root, "in.txt", &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "Fill") {
		t.Errorf("benchstat(in.txt) = %v, stdout %q, stderr %q; want nil and a table with Fill", err, stdout.String(), stderr.String())
	}
}

// TestBenchstatError checks a benchstat that reports an error on stderr
// (it exits 0 even then) is taken as failed.
func TestBenchstatError(t *testing.T) {
	tests := []struct {
		stderr  string
		wantErr bool
	}{
		{"", false},
		{"in.txt:3: syntax error: bad line\n", false},
		{"benchstat: open in.txt: no such file or directory\n", true},
		{"in.txt:3: syntax error\nbenchstat: parsing -filter: bad\n", true},
	}
	for _, tt := range tests {
		if err := benchstatError(tt.stderr); (err != nil) != tt.wantErr {
			t.Errorf("benchstatError(%q) = %v; want error %v", tt.stderr, err, tt.wantErr)
		}
	}
}
