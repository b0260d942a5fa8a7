package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
	"softgpu/tools/internal/trace"
)

type result struct {
	code           int
	stdout, stderr string
}

func runTrace(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func TestRun(t *testing.T) {
	good, bad := fixture.TraceTestdata(t, "good/stage7.json"), fixture.TraceTestdata(t, "bad/fields.json")
	empty := filepath.Join(t.TempDir(), "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{"traceEvents":[]}`), 0o644))
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no command", nil, cli.ExitUsage, "", "trace: no command given; want one of summary, check, svg, make"},
		{"unknown command", []string{"frob"}, cli.ExitUsage, "", `unknown command "frob"`},
		{"help", []string{"-h"}, cli.ExitOK, "usage: go run ./tools/cmd/trace COMMAND", ""},
		{"summary help", []string{"summary", "-h"}, cli.ExitOK, "usage: go run ./tools/cmd/trace summary FILE.json", ""},
		{"svg help", []string{"svg", "-help"}, cli.ExitOK, "-first US", ""},
		{"make help", []string{"make", "-h"}, cli.ExitOK, "-allow-dirty", ""},

		{"summary", []string{"summary", good}, cli.ExitOK, "engine copy     750 ns  0.3%", ""},
		{"summary without a file", []string{"summary"}, cli.ExitUsage, "", "trace summary: want a trace FILE.json"},
		{"summary of two files", []string{"summary", good, good}, cli.ExitUsage, "", "got 2 arguments"},
		{"summary of a missing file", []string{"summary", "/nonexistent/trace.json"}, cli.ExitFailed, "", "trace summary: open /nonexistent/trace.json: no such file"},
		{"summary of an invalid trace", []string{"summary", bad}, cli.ExitFailed, "", "event 1: field dur: -0.5 is negative"},
		{"summary bad flag", []string{"summary", "-x", good}, cli.ExitUsage, "", "flag provided but not defined: -x"},

		{"check good", []string{"check", good}, cli.ExitOK, "ok (stage7-idle, 15 events on 5 tracks, 0 dropped)", ""},
		{"check bad", []string{"check", bad}, cli.ExitFailed, "", "9 problems"},

		{"svg", []string{"svg", good}, cli.ExitOK, "<svg xmlns=", ""},
		{"svg flags after the file", []string{"svg", good, "-first", "5"}, cli.ExitOK, "<svg xmlns=", ""},
		{"svg to before from", []string{"svg", "-from", "2", "-to", "1", good}, cli.ExitUsage, "", "trace svg: -to 1 is not after -from 2"},
		{"svg first with from", []string{"svg", "-first", "3", "-from", "1", good}, cli.ExitUsage, "", "give one or the other"},
		{"svg negative", []string{"svg", "-from", "-1", good}, cli.ExitUsage, "", "want none negative"},
		{"svg bad number", []string{"svg", "-from", "soon", good}, cli.ExitUsage, "", `invalid value "soon"`},
		{"svg from too late", []string{"svg", "-from", "1e16", good}, cli.ExitUsage, "", "trace svg: -from 1e+16: want a finite number of µs, at most 1e+12"},
		{"svg to Inf", []string{"svg", "-to", "Inf", good}, cli.ExitUsage, "", "trace svg: -to +Inf: want a finite number of µs, at most 1e+12"},
		{"svg first Inf", []string{"svg", "-first", "Inf", good}, cli.ExitUsage, "", "trace svg: -first +Inf: want a finite number of µs, at most 1e+12"},
		{"svg first too long", []string{"svg", "-first", "1e300", good}, cli.ExitUsage, "", "trace svg: -first 1e+300: want a finite number of µs, at most 1e+12"},
		{"svg from NaN", []string{"svg", "-from", "NaN", good}, cli.ExitUsage, "", "trace svg: -from NaN: want a finite number of µs, at most 1e+12"},
		{"svg of no events", []string{"svg", empty}, cli.ExitUsage, "", "the trace has no events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runTrace(t, tt.args...)
			assert.Equal(t, tt.wantCode, r.code, "trace %q = exit %d\nstdout:\n%s\nstderr:\n%s", tt.args, r.code, r.stdout, r.stderr)
			if !strings.Contains(r.stdout, tt.wantStdout) {
				t.Errorf("trace %q stdout lacks %q:\n%s", tt.args, tt.wantStdout, r.stdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("trace %q stderr lacks %q:\n%s", tt.args, tt.wantStderr, r.stderr)
			}
			if strings.Contains(r.stderr, "trace: trace:") || strings.Contains(r.stderr, ": trace: ") {
				t.Errorf("trace %q stderr doubles its prefix:\n%s", tt.args, r.stderr)
			}
			if tt.wantCode == cli.ExitUsage && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("trace %q misuse took %d lines; want one:\n%s", tt.args, strings.Count(r.stderr, "\n"), r.stderr)
			}
		})
	}
}

func TestSVGOutput(t *testing.T) {
	// A trace with a meta file beside it: the caption comes from the meta.
	dir := t.TempDir()
	data, err := os.ReadFile(fixture.TraceTestdata(t, "good/stage7.json"))
	require.NoError(t, err)
	file := filepath.Join(dir, "gap.json")
	meta := `{"command": "go run ./tools/cmd/trace make -stage stage7-idle -bench X -name gap", "commit": "0123456789abcdef"}`
	for path, content := range map[string][]byte{file: data, trace.MetaPath(file): []byte(meta)} {
		require.NoError(t, os.WriteFile(path, content, 0o644))
	}
	r := runTrace(t, "svg", "-first", "10", file)
	require.Equal(t, cli.ExitOK, r.code, "trace svg = exit %d:\n%s", r.code, r.stderr)
	var texts []string
	decoder := xml.NewDecoder(strings.NewReader(r.stdout))
	inText := false
	for {
		token, err := decoder.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "trace svg wrote invalid XML")
		switch token := token.(type) {
		case xml.StartElement:
			inText = token.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(token))
			}
		}
	}
	joined := strings.Join(texts, " ")
	for _, want := range []string{"stage7-idle: gap", "Trace gap.json, made by go run", "at commit 0123456789ab."} {
		if !strings.Contains(joined, want) {
			t.Errorf("the SVG's texts lack %q: %q", want, texts)
		}
	}
}

func TestMakeMisuse(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	t.Chdir(root)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	base := []string{"make", "-stage", "stage0-mailbox", "-bench", "X", "-name", "n"}
	with := func(extra ...string) []string { return append(slices.Clone(base), extra...) }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no stage", []string{"make", "-bench", "X", "-name", "n"}, "-stage is required"},
		{"no bench", []string{"make", "-stage", "stage0-mailbox", "-name", "n"}, "-bench is required"},
		{"no name", []string{"make", "-stage", "stage0-mailbox", "-bench", "X"}, "-name is required"},
		{"name with a directory", []string{"make", "-stage", "stage0-mailbox", "-bench", "X", "-name", "a/b"}, "plain file name"},
		{"name with .json", []string{"make", "-stage", "stage0-mailbox", "-bench", "X", "-name", "a.json"}, "plain file name"},
		{"argument", with("extra"), `unexpected arguments ["extra"]`},
		{"trace variable", with("-env", "SOFTGPU_TRACE=/tmp/x"), "make sets SOFTGPU_TRACE itself"},
		{"bad env", with("-env", "NOVALUE"), "KEY=VALUE"},
		{"unknown stage", []string{"make", "-stage", "stage42", "-bench", "X", "-name", "n"}, "stage42"},
		{"missing stage", []string{"make", "-stage", "stage1-ring", "-bench", "X", "-name", "n"}, "stage1-ring does not exist"},
		{"missing stage, with a trailing slash", []string{"make", "-stage", "stage1-ring/", "-bench", "X", "-name", "n"}, "stage stage1-ring does not exist"},
		{"bad regexp", []string{"make", "-stage", "stage0-mailbox", "-bench", "(", "-name", "n"}, "-bench \"(\": error parsing regexp: missing closing )"},
		{"bad benchtime", with("-benchtime", "1z"), `invalid value "1z" for flag -benchtime: want a positive duration`},
		{"zero benchtime", with("-benchtime", "0x"), `invalid value "0x" for flag -benchtime: want a positive count`},
		{"out a file", with("-out", file), "-out " + file + ": " + file + " is not a directory"},
		{"out under a file", with("-out", filepath.Join(file, "traces")), "-out " + filepath.Join(file, "traces") + ": cannot create"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runTrace(t, tt.args...)
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tt.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("trace %q = exit %d, %q; want exit %d and one line with %q", tt.args, r.code, r.stderr, cli.ExitUsage, tt.want)
			}
		})
	}
}

func TestMake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fixture stage")
	}
	root := fixture.Repo(t, "stage0-mailbox")
	fixture.AddTracedBenchmark(t, root, "stage0-mailbox")
	good, bad := fixture.TraceTestdata(t, "good/stage7.json"), fixture.TraceTestdata(t, "bad/unsorted.json")
	t.Chdir(root)
	out := t.TempDir()
	tmp := t.TempDir() // make keeps an invalid trace in a temporary directory: here, not in /tmp
	t.Setenv("TMPDIR", tmp)
	args := func(name, source, bench string, extra ...string) []string {
		return append([]string{"make", "-stage", "stage0-mailbox", "-bench", bench, "-benchtime", "2x",
			"-env", "FIXTURE_TRACE=" + source, "-name", name, "-out", out}, extra...)
	}

	// No git in the fixture repository: refused without -allow-dirty.
	r := runTrace(t, args("nogit", good, "^BenchmarkTraced/leaf=a$")...)
	if r.code != cli.ExitFailed || !strings.Contains(r.stderr, "-allow-dirty") {
		t.Errorf("make without a commit = exit %d, %q; want exit 1 naming -allow-dirty", r.code, r.stderr)
	}

	tests := []struct {
		name       string
		source     string
		bench      string
		wantCode   int
		wantStderr string
		wantRan    []string
	}{
		{"one leaf", good, "^BenchmarkTraced/leaf=a$", cli.ExitOK, "wrote", []string{"Traced/leaf=a"}},
		{"two leaves", good, "^BenchmarkTraced$", cli.ExitOK, "warning: 2 benchmarks ran", []string{"Traced/leaf=a", "Traced/leaf=b"}},
		{"invalid trace", bad, "^BenchmarkTraced/leaf=a$", cli.ExitFailed, "events must be sorted by ts", nil},
		{"no trace", "", "^BenchmarkTraced/leaf=a$", cli.ExitFailed, "wrote no trace to SOFTGPU_TRACE", nil},
		{"no benchmark", good, "^BenchmarkNothing$", cli.ExitFailed, "no benchmark of stage0-mailbox matched", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			r := runTrace(t, args(name, tt.source, tt.bench, "-allow-dirty")...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Fatalf("make %s = exit %d; want %d and stderr with %q\nstderr:\n%s", tt.name, r.code, tt.wantCode, tt.wantStderr, r.stderr)
			}
			traceFile := filepath.Join(out, name+".json")
			if _, kept, ok := strings.Cut(r.stderr, "(kept at "); ok && !strings.HasPrefix(kept, tmp+string(filepath.Separator)) {
				t.Errorf("make %s kept the trace outside the test's TMPDIR %s: %s", tt.name, tmp, r.stderr)
			}
			if tt.wantCode != cli.ExitOK {
				_, err := os.Stat(traceFile)
				assert.Error(t, err, "make %s failed but wrote %s", tt.name, traceFile)
				return
			}
			if _, err := trace.Load(traceFile); err != nil {
				t.Errorf("the written trace does not load: %v", err)
			}
			meta, err := trace.LoadMeta(trace.MetaPath(traceFile))
			require.NoError(t, err)
			if meta.Stage != "stage0-mailbox" || meta.Bench != tt.bench || meta.Benchtime != "2x" || !slices.Equal(meta.Benchmarks, tt.wantRan) ||
				meta.Machine.Cores < 1 || meta.Machine.Go == "" || meta.Date == "" || !slices.Equal(meta.Env, []string{"FIXTURE_TRACE=" + tt.source}) {
				t.Errorf("meta = %+v; want stage0-mailbox, bench %q, 2x, benchmarks %q, a machine, a date and the env", meta, tt.bench, tt.wantRan)
			}
			// The command a reader re-runs: -out said where this run wrote.
			wantCommand := "go run ./tools/cmd/trace make -stage stage0-mailbox -bench " + cli.Quote(tt.bench) +
				" -benchtime 2x -env " + cli.Quote("FIXTURE_TRACE="+tt.source) + " -name " + name + " -allow-dirty"
			if meta.Command != wantCommand {
				t.Errorf("meta command = %q; want %q", meta.Command, wantCommand)
			}
			if !strings.Contains(r.stdout, "stage7-idle: 15 events") {
				t.Errorf("make did not print the summary:\n%s", r.stdout)
			}
		})
	}

	// The trace and its meta are written as a pair: when the trace cannot
	// be written (here a directory is in its way), no new meta is left
	// beside it.
	t.Run("trace in the way", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(out, "inway.json", "x"), 0o755))
		r := runTrace(t, args("inway", good, "^BenchmarkTraced/leaf=a$", "-allow-dirty")...)
		if r.code != cli.ExitFailed {
			t.Errorf("make with a directory in the trace's way = exit %d; want 1\nstderr:\n%s", r.code, r.stderr)
		}
		_, err := os.Stat(filepath.Join(out, "inway.meta.json"))
		assert.True(t, os.IsNotExist(err), "make wrote a meta without its trace (%v)", err)
	})
}

// TestMakeCommit checks that make records the commit of a clean tree and
// refuses a dirty one.
func TestMakeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fixture stage")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := fixture.Repo(t, "stage0-mailbox")
	fixture.AddTracedBenchmark(t, root, "stage0-mailbox")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %q\n%s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "fixture")
	head := git("rev-parse", "HEAD")
	source := fixture.TraceTestdata(t, "good/array.json")
	t.Chdir(root)
	out := t.TempDir() // outside the repository, so writing keeps the tree clean
	args := []string{"make", "-stage", "stage0-mailbox", "-bench", "^BenchmarkTraced/leaf=a$", "-benchtime", "1x",
		"-env", "FIXTURE_TRACE=" + source, "-name", "clean", "-out", out}

	if r := runTrace(t, args...); r.code != cli.ExitOK {
		t.Fatalf("make on a clean tree = exit %d:\n%s", r.code, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "clean.meta.json"))
	require.NoError(t, err)
	var meta trace.Meta
	if err := json.Unmarshal(data, &meta); err != nil || meta.Commit != head {
		t.Errorf("meta commit = %q (%v); want %s", meta.Commit, err, head)
	}

	require.NoError(t, os.WriteFile(filepath.Join(root, "stage0-mailbox", "new.txt"), []byte("x"), 0o644))
	r := runTrace(t, args...)
	if r.code != cli.ExitFailed || !strings.Contains(r.stderr, "uncommitted changes") {
		t.Errorf("make on a dirty tree = exit %d, %q; want exit 1 about uncommitted changes", r.code, r.stderr)
	}
	if r := runTrace(t, append(args, "-allow-dirty")...); r.code != cli.ExitOK {
		t.Fatalf("make -allow-dirty on a dirty tree = exit %d:\n%s", r.code, r.stderr)
	}
	if meta, err := trace.LoadMeta(filepath.Join(out, "clean.meta.json")); err != nil || meta.Commit != head+"+dirty" {
		t.Errorf("meta commit after -allow-dirty = %v, %v; want %s+dirty", meta, err, head)
	}
}
