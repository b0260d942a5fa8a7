package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
	"softgpu/tools/internal/records"
)

const allStages = "stage0-mailbox, stage1-ring, stage2-fence, stage3-pinned, stage4-nolock, stage7-idle, stage5-vm, stage6-runlist, stage8-managed, stage9-chardev"

// TestRunUsage checks that every misuse is refused before anything is
// built or measured, with exit 2 and one line naming the bad input.
func TestRunUsage(t *testing.T) {
	root, file := fixture.MisuseRepo(t, "stage0-mailbox")
	tests := []struct {
		name       string
		args       []string
		wantStderr string // in full, without the newline
	}{
		{"no name", []string{}, "record: -name is required: the record is written to NAME.json and NAME.txt"},
		{"name with directory", []string{"-name", "a/b"}, `record: -name "a/b" must be a plain file name, without directories, a leading dot or .json or .txt`},
		{"name with .json", []string{"-name", "smoke.json"}, `record: -name "smoke.json" must be a plain file name, without directories, a leading dot or .json or .txt`},
		{"name with .txt", []string{"-name", "smoke.txt"}, `record: -name "smoke.txt" must be a plain file name, without directories, a leading dot or .json or .txt`},
		{"unknown stage", []string{"-name", "x", "-stages", "stage42"}, `record: -stages: unknown stage "stage42"; stages are: ` + allStages},
		{"missing stage", []string{"-name", "x", "-stages", "stage1-ring"}, "record: -stages: stage stage1-ring does not exist under " + root + " yet; existing stages: stage0-mailbox"},
		{"stages naming none", []string{"-name", "x", "-stages", ",,"}, `record: -stages: ",," names no stage; existing stages: stage0-mailbox`},
		{"bad env", []string{"-name", "x", "-env", "NOVALUE"}, `record: invalid value "NOVALUE" for flag -env: want KEY=VALUE, got "NOVALUE"`},
		{"zero passes", []string{"-name", "x", "-passes", "0"}, "record: -passes 0: want at least 1"},
		{"bad benchtime", []string{"-name", "x", "-benchtime", "1z"},
			`record: invalid value "1z" for flag -benchtime: want a positive duration like 1s or 300ms, or a count of iterations like 100x`},
		{"empty benchtime", []string{"-benchtime=", "-name", "x"},
			`record: invalid value "" for flag -benchtime: want a positive duration like 1s or 300ms, or a count of iterations like 100x`},
		{"bad canary benchtime", []string{"-name", "x", "-canary-benchtime", "-5ms"},
			`record: invalid value "-5ms" for flag -canary-benchtime: want a positive duration like 1s or 300ms, or a count of iterations like 100x`},
		{"tolerance below 1", []string{"-name", "x", "-canary-tolerance", "0.9"}, "record: -canary-tolerance 0.9: want a finite 1 or more (the slower canary over the faster)"},
		{"tolerance NaN", []string{"-name", "x", "-canary-tolerance", "NaN"}, "record: -canary-tolerance NaN: want a finite 1 or more (the slower canary over the faster)"},
		{"tolerance Inf", []string{"-name", "x", "-canary-tolerance", "Inf"}, "record: -canary-tolerance +Inf: want a finite 1 or more (the slower canary over the faster)"},
		{"negative reruns", []string{"-name", "x", "-max-reruns", "-1"}, "record: -max-reruns -1: want 0 or more"},
		{"bad regexp", []string{"-name", "x", "-bench", "[z-a]"}, "record: -bench \"[z-a]\": error parsing regexp: invalid character class range: `z-a`"},
		{"unknown flag", []string{"-name", "x", "-fast"}, "record: flag provided but not defined: -fast"},
		{"the old gate's flag", []string{"-name", "x", "-threshold", "0.5"}, "record: flag provided but not defined: -threshold"},
		{"arguments", []string{"-name", "x", "stage0-mailbox"}, `record: unexpected arguments ["stage0-mailbox"] (flags only)`},
		{"-out is a file", []string{"-name", "x", "-out", file}, "record: -out " + file + ": " + file + " is not a directory"},
		{"-out under a file", []string{"-name", "x", "-out", filepath.Join(file, "recs")},
			"record: -out " + filepath.Join(file, "recs") + ": cannot create " + filepath.Join(file, "recs") + ": " + file + " is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixture.CheckMisuse(t, "record", run, tt.args, tt.wantStderr)
		})
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-name", "x", "-help"}} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), args, &stdout, &stderr)
		out := stdout.String()
		if code != cli.ExitOK || stderr.Len() != 0 || !strings.HasPrefix(out, "usage: go run ./tools/cmd/record -name NAME") ||
			!strings.Contains(out, "-passes int") || !strings.Contains(out, "(default 5)") || !strings.Contains(out, "-allow-dirty") {
			t.Errorf("record %q = exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", args, code, out, stderr.String())
		}
	}
}

// gitRepo makes the fixture a git repository with everything committed.
func gitRepo(t *testing.T, root string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	gitIn(t, root, "init", "-q")
	commitAll(t, root)
}

func commitAll(t *testing.T, root string) {
	t.Helper()
	gitIn(t, root, "add", "-A")
	gitIn(t, root, "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "fixture")
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %q\n%s", args, out)
	return strings.TrimSpace(string(out))
}

// TestRunRefusals checks the refusals that protect the records: a tree
// with uncommitted changes, and a committed record of the same name. Both
// come before anything is built, and exit 1.
func TestRunRefusals(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	recs := filepath.Join(root, "book", "records")
	require.NoError(t, os.MkdirAll(recs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(recs, "stages.json"), []byte("{}\n"), 0o644))
	gitRepo(t, root)
	t.Chdir(root)
	tests := []struct {
		name       string
		dirty      string // a file to change before running; "" for none
		args       []string
		wantStderr string
	}{
		{"committed record", "", []string{"-name", "stages"},
			"record: " + filepath.Join(recs, "stages.json") + " is committed: a new record would replace it; add -force to re-record it, or choose another -name"},
		{"dirty tree", "stage0-mailbox/softgpu.go", []string{"-name", "new"},
			"record: the tree has uncommitted changes (M stage0-mailbox/softgpu.go): a record names the commit it measured, so commit or stash them first, or add -allow-dirty (the record is then marked dirty)"},
		{"untracked file", "notes.md", []string{"-name", "new", "-force"},
			"record: the tree has uncommitted changes (?? notes.md): a record names the commit it measured, so commit or stash them first, or add -allow-dirty (the record is then marked dirty)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dirty != "" {
				p := filepath.Join(root, tt.dirty)
				old, _ := os.ReadFile(p)
				require.NoError(t, os.WriteFile(p, append(old, "// changed\n"...), 0o644))
				defer gitIn(t, root, "checkout", "-q", "--", ".")
				defer os.Remove(filepath.Join(root, "notes.md"))
			}
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != cli.ExitFailed || stderr.String() != tt.wantStderr+"\n" {
				t.Errorf("record %q = exit %d, stderr\n%q\nwant exit %d and\n%q", tt.args, code, stderr.String(), cli.ExitFailed, tt.wantStderr+"\n")
			}
		})
	}
}

// TestRunFixture records two fixture stages for real, quickly, in a clean
// git repository. Fill/size=64B's canary moves in its first measuring run
// (FIXTURE_CANARY_MOVE), so that row is re-run once. It then checks the
// record and that a second run needs -force to replace it once committed.
func TestRunFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fixture stages")
	}
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	gitRepo(t, root)
	t.Chdir(root)
	out := filepath.Join(root, "book", "records")
	moved := filepath.Join(t.TempDir(), "moved")
	args := []string{"-passes", "2", "-benchtime", "20x", "-canary-benchtime", "20x", "-canary-count", "2",
		"-env", "FIXTURE_CANARY_MOVE=" + moved, "-name", "smoke", "-out", out}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("record %q = exit %d:\n%s", args, code, stderr.String())
	}
	for _, want := range []string{
		"record: 2 stages, 7 benchmarks, 2 passes of -benchtime 20x: about ",
		"record: pass 1 of 2: stage0-mailbox (1/2), canary ",
		"record: pass 1, stage0-mailbox Fill/size=64B: canary moved 100 → 400 ns (×4.00, tolerance ×1.3): re-run 1 of 3",
		"2 passes; 1 row re-run (1 re-runs in all), 0 unsteady",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("record progress lacks %q:\n%s", want, stderr.String())
		}
	}
	rec, err := records.Load(filepath.Join(out, "smoke.json"))
	require.NoError(t, err)
	assert.NoError(t, records.Validate(rec), "Validate(recorded)")
	head := gitIn(t, root, "rev-parse", "HEAD")
	if rec.Schema != 2 || rec.Commit != head || rec.Dirty || len(rec.Canary) != 2 || rec.RowsRerun != 1 {
		t.Errorf("record: schema %d, commit %q, dirty %v, %d pass canaries, %d rows re-run; want 2, %q, false, 2, 1",
			rec.Schema, rec.Commit, rec.Dirty, len(rec.Canary), rec.RowsRerun, head)
	}
	// The command a reader re-runs: every flag but -out, which said where
	// this run wrote, not how the record is made.
	assert.Equal(t, "go run ./tools/cmd/record "+strings.Join(args[:len(args)-2], " "), rec.Command, "record command")
	if rec.Settings.Passes != 2 || rec.Settings.CanaryTolerance != 1.3 || rec.Settings.MaxReruns != 3 {
		t.Errorf("record settings = %+v", rec.Settings)
	}
	fill, _ := rec.Find("stage0-mailbox", "Fill/size=64B")
	want := []records.RowCanary{{Pass: 1, Before: 100, After: 101}, {Pass: 2, Before: 100, After: 101}}
	if fmt.Sprint(fill.Canary) != fmt.Sprint(want) || fill.Reruns != 1 || fill.Unsteady {
		t.Errorf("stage0-mailbox Fill row: canary %+v, reruns %d, unsteady %v; want %+v, 1, false", fill.Canary, fill.Reruns, fill.Unsteady, want)
	}
	if _, ok := fill.Metric("canary-before-ns"); ok {
		t.Errorf("the canary stayed among the row's metrics: %+v", fill.Metrics)
	}
	for _, want := range []struct{ stage, name, unit string }{
		{"stage0-mailbox", "Fill/size=64B", "cores"},
		{"stage1-ring", "FillStream/size=64B/depth=4", "doorbells/op"},
		{"stage1-ring", "Baseline/memmove/size=4KiB", "B/s"},
		{"stage0-mailbox", "Baseline/pingpong", "ns/op"},
	} {
		row, ok := rec.Find(want.stage, want.name)
		if !ok {
			t.Errorf("record has no row %s %s", want.stage, want.name)
			continue
		}
		if m, ok := row.Metric(want.unit); !ok || len(m.Values) != 2 || m.Min > m.Median || m.Median > m.Max {
			t.Errorf("row %s %s metric %s = %+v, %v; want 2 values with min <= median <= max", want.stage, want.name, want.unit, m, ok)
		}
	}
	for _, f := range []string{"smoke.json", "smoke.txt"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v; want mode 0644", f, err)
		}
	}
	text, err := os.ReadFile(filepath.Join(out, "smoke.txt"))
	require.NoError(t, err)
	if strings.Contains(string(text), "pkg:") || strings.Contains(string(text), "canary-") || strings.Count(string(text), "stage: stage1-ring") != 2 {
		t.Errorf("smoke.txt should carry two stage: stage1-ring labels, no pkg: and no canary metric\n%s", text)
	}

	// Committed, the record is replaced only with -force.
	commitAll(t, root)
	again := []string{"-passes", "1", "-benchtime", "5x", "-canary-benchtime", "5x", "-canary-count", "1", "-name", "smoke", "-out", out, "-stages", "stage1-ring"}
	stderr.Reset()
	if code := run(context.Background(), again, &stdout, &stderr); code != cli.ExitFailed || !strings.Contains(stderr.String(), "add -force") {
		t.Errorf("record over a committed record = exit %d, %q; want exit 1 asking for -force", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), append(again, "-force"), &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("record -force = exit %d:\n%s", code, stderr.String())
	}
	if rec, err := records.Load(filepath.Join(out, "smoke.json")); err != nil || len(rec.Settings.Stages) != 1 {
		t.Errorf("after -force, smoke.json = %+v, %v; want the new one-stage record", rec, err)
	}
}

// TestRunUnsteady records a row whose canary moves in every run: it is
// re-run -max-reruns times, kept, and marked unsteady. The fixture is not
// a git repository: the record has no commit and is not dirty.
func TestRunUnsteady(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fixture stages")
	}
	root := fixture.Repo(t, "stage0-mailbox")
	t.Chdir(root)
	out := t.TempDir()
	args := []string{"-passes", "1", "-max-reruns", "2", "-benchtime", "10x", "-canary-benchtime", "10x", "-canary-count", "1",
		"-env", "FIXTURE_CANARY_MOVE=always", "-name", "noisy", "-out", out}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("record %q = exit %d:\n%s", args, code, stderr.String())
	}
	rec, err := records.Load(filepath.Join(out, "noisy.json"))
	require.NoError(t, err)
	fill, _ := rec.Find("stage0-mailbox", "Fill/size=64B")
	if fill.Reruns != 2 || !fill.Unsteady || rec.RowsRerun != 1 || rec.Commit != "" || rec.Dirty {
		t.Errorf("record: Fill reruns %d, unsteady %v; rows re-run %d, commit %q, dirty %v; want 2, true, 1, none, false",
			fill.Reruns, fill.Unsteady, rec.RowsRerun, rec.Commit, rec.Dirty)
	}
	if !strings.Contains(stderr.String(), "unsteady: no run held the canary within ×1.3 in 2 re-runs") {
		t.Errorf("record did not say the row was unsteady:\n%s", stderr.String())
	}
}

// TestRunSignals builds the record command, starts it on a fixture with a
// long -benchtime, and stops it with each signal once a benchmark is
// running: it must exit promptly with 128+signal, write nothing, and leave
// no benchmark process behind.
func TestRunSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and fixture stages")
	}
	bin := filepath.Join(t.TempDir(), "record")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := fixture.Repo(t, "stage0-mailbox")
	tests := []struct {
		sig      syscall.Signal
		wantCode int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
		{syscall.SIGHUP, 129},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			tmp, out := t.TempDir(), t.TempDir()
			cmd := exec.Command(bin, "-name", "stopped", "-out", out, "-passes", "1", "-benchtime", "60s", "-canary-benchtime", "10x", "-canary-count", "1")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			defer cmd.Process.Kill()
			var seen strings.Builder
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				seen.WriteString(sc.Text() + "\n")
				if strings.HasPrefix(sc.Text(), "record: pass 1 of 1: stage0-mailbox") {
					break
				}
			}
			if !benchmarkRunning(tmp) {
				time.Sleep(200 * time.Millisecond)
			}
			start := time.Now()
			require.NoError(t, cmd.Process.Signal(tt.sig))
			for sc.Scan() {
				seen.WriteString(sc.Text() + "\n")
			}
			err = cmd.Wait()
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("record took %v to stop after %v; want it prompt", d, tt.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != tt.wantCode {
				t.Errorf("record stopped by %v exited %d (%v); want %d\n%s", tt.sig, code, err, tt.wantCode, seen.String())
			}
			if !strings.Contains(seen.String(), "record: interrupted; nothing written") {
				t.Errorf("record did not say it wrote nothing:\n%s", seen.String())
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("record stopped by %v left %d files in -out", tt.sig, len(entries))
			}
			for deadline := time.Now().Add(3 * time.Second); benchmarkRunning(tmp); {
				if time.Now().After(deadline) {
					t.Fatalf("a benchmark process from %s is still running after record stopped", tmp)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// benchmarkRunning reports whether a live process runs an executable from
// under dir (the TMPDIR where record builds its test binaries).
func benchmarkRunning(dir string) bool {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	state := regexp.MustCompile(`\) [ZX] `)
	for _, p := range paths {
		cmdline, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(cmdline), dir) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err == nil && !state.Match(stat) {
			return true
		}
	}
	return false
}

// TestUsageDuration checks the usage's estimate of a default run is the
// one tools/README.md derives (its table of typical durations), so that
// the two cannot drift apart.
func TestUsageDuration(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("\\| `record -name stages` \\|[^|]*\\| (about [^(|]*? before canaries and re-runs)").FindSubmatch(readme)
	require.NotNil(t, m, "tools/README.md has no row for record -name stages with its estimate")
	if want := strings.Join(strings.Fields(string(m[1])), " "); !strings.Contains(strings.Join(strings.Fields(usage), " "), want) {
		t.Errorf("record's usage does not say %q, as tools/README.md does:\n%s", want, usage)
	}
}
