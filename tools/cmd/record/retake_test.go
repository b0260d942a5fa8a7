package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/trace"
)

// fakeRecord writes a minimal valid record named name with command.
func fakeRecord(t *testing.T, dir, name, command string, reference bool) {
	t.Helper()
	rec := &records.Record{
		Schema: records.SchemaVersion, Name: name, Date: "2026-12-01T00:00:00Z", Command: command, Reference: reference, Transcribed: reference,
		Settings: records.Settings{Passes: 1, Benchtime: "2s"},
		Rows: []records.Row{{Stage: "stage0-mailbox", Benchmark: "Fill/size=64B",
			Metrics: []records.Metric{records.NewMetric("ns/op", []float64{100})}}},
	}
	if reference {
		rec.Source = "seed 004"
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, records.Save(filepath.Join(dir, name+".json"), rec))
}

// fakeTrace writes book/traces/NAME.meta.json with command and, beside
// it, a copy of the trace test data stage7.json as NAME.json.
func fakeTrace(t *testing.T, dir, name, command string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	meta, err := json.MarshalIndent(trace.Meta{Command: command, Stage: "stage0-mailbox", Commit: "0123456789abcdef"}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".meta.json"), meta, 0o644))
	data, err := os.ReadFile(fixture.TraceTestdata(t, "good/stage7.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644))
}

// retakeRepo is a fixture repository, committed, whose book/records holds
// a measured record (fill), one kept as its "before" edition (fill-before,
// whose command writes fill.json) and a transcription (reference), and
// whose book/traces holds a trace (traced, made once with -allow-dirty)
// one kept as its "before" edition (traced-before) and one whose meta
// names no command (by-hand). Stage 0 has the
// fixture's traced benchmark, and the trace's command names the fixture
// trace it copies.
func retakeRepo(t *testing.T) (root, fixtureTrace string) {
	t.Helper()
	root = fixture.Repo(t, "stage0-mailbox")
	fixture.AddTracedBenchmark(t, root, "stage0-mailbox")
	fixtureTrace = fixture.TraceTestdata(t, "good/array.json")
	recs := filepath.Join(root, "book", "records")
	fakeRecord(t, recs, "fill", "go run ./tools/cmd/record -out /tmp/old -name fill -stages stage0-mailbox -bench '^BenchmarkFill$' -passes 1 -benchtime 5x -canary-benchtime 5x -canary-count 1", false)
	fakeRecord(t, recs, "fill-before", "go run ./tools/cmd/record -name fill -stages stage0-mailbox -bench '^BenchmarkFill$' -passes 1", false)
	fakeRecord(t, recs, "reference", "", true)
	traces := filepath.Join(root, "book", "traces")
	fakeTrace(t, traces, "traced", "go run ./tools/cmd/trace make -allow-dirty -stage stage0-mailbox -bench '^BenchmarkTraced/leaf=a$' -name traced -benchtime 1x -env FIXTURE_TRACE="+fixtureTrace+" -out /tmp/old-traces")
	fakeTrace(t, traces, "traced-before", "go run ./tools/cmd/trace make -stage stage0-mailbox -bench '^BenchmarkTraced/leaf=b$' -name traced")
	fakeTrace(t, traces, "by-hand", "")
	gitRepo(t, root)
	t.Chdir(root)
	return root, fixtureTrace
}

func TestRetakePlan(t *testing.T) {
	root, fixtureTrace := retakeRepo(t)
	items, kept, err := retakePlan(root, "/tmp/edition")
	require.NoError(t, err)
	var got []string
	for _, it := range items {
		got = append(got, it.kind.noun+" "+it.name+": "+strings.Join(it.args, " "))
		if it.estimate <= 0 {
			t.Errorf("%s %s: estimate = %v; want a positive duration", it.kind.noun, it.name, it.estimate)
		}
		// stage7.json spans microseconds, so go test's start is the estimate.
		if it.kind == traceKind && it.estimate != traceStart {
			t.Errorf("trace %s: estimate = %v; want %v, the least a trace takes", it.name, it.estimate, traceStart)
		}
	}
	want := []string{
		// The old -out dropped, the edition's added.
		"record fill: -name fill -stages stage0-mailbox -bench ^BenchmarkFill$ -passes 1 -benchtime 5x -canary-benchtime 5x -canary-count 1 -out /tmp/edition/records",
		// The old -out dropped and -allow-dirty too: a retake starts from a clean tree.
		"trace traced: -stage stage0-mailbox -bench ^BenchmarkTraced/leaf=a$ -name traced -benchtime 1x -env FIXTURE_TRACE=" + fixtureTrace + " -out /tmp/edition/traces",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("retakePlan re-takes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantKept := []string{
		`record fill-before: kept as the "before" edition of fill (its command writes fill.json), not re-taken`,
		"record reference: a transcription (seed 004), not a measurement of this tree",
		"trace by-hand: no command says how it was made",
		`trace traced-before: kept as the "before" edition of traced (its command writes traced.json), not re-taken`,
	}
	if strings.Join(kept, "\n") != strings.Join(wantKept, "\n") {
		t.Errorf("kept = %q; want %q", kept, wantKept)
	}
}

// TestRetakeRuns runs -retake with a fake runner in place of record and
// trace make: the plan's estimate comes first, every record then every
// trace runs in order with its own -out, -force reaches the records alone,
// and the first failure stops the edition, saying what it holds.
func TestRetakeRuns(t *testing.T) {
	root, _ := retakeRepo(t)
	tests := []struct {
		name     string
		force    bool
		failing  string // the item whose run fails, as "trace traced"
		wantCode int
		wantRuns []string
		wantLast string
	}{
		{"complete", false, "", cli.ExitOK,
			[]string{"record fill -out OUT/records", "trace traced -out OUT/traces"},
			"record: edition complete: 1 record and 1 trace at commit "},
		{"force", true, "", cli.ExitOK,
			[]string{"record fill -out OUT/records -force", "trace traced -out OUT/traces"},
			"record: edition complete: 1 record and 1 trace at commit "},
		{"a trace fails", false, "trace traced", cli.ExitFailed,
			[]string{"record fill -out OUT/records", "trace traced -out OUT/traces"},
			"record: trace traced failed (exit 1): the edition is incomplete; 1 of 1 records and 0 of 1 traces are in OUT"},
		{"a record fails", false, "record fill", cli.ExitFailed,
			[]string{"record fill -out OUT/records"},
			"record: record fill failed (exit 1): the edition is incomplete; 0 of 1 records and 0 of 1 traces are in OUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			var runs []string
			fake := func(_ context.Context, it retakeItem, _, _ io.Writer) int {
				args := strings.Join(it.args, " ")
				i := strings.Index(args, "-out ")
				runs = append(runs, it.kind.noun+" "+it.name+" "+strings.ReplaceAll(args[i:], out, "OUT"))
				if it.kind.noun+" "+it.name == tt.failing {
					return cli.ExitFailed
				}
				return cli.ExitOK
			}
			var stdout, stderr strings.Builder
			c := cli.NewCommand("record", usage, &stdout, &stderr)
			code := retake(context.Background(), c, root, out, tt.force, fake)
			lines := strings.Split(strings.TrimSuffix(strings.ReplaceAll(stderr.String(), out, "OUT"), "\n"), "\n")
			if code != tt.wantCode || !strings.HasPrefix(lines[len(lines)-1], tt.wantLast) {
				t.Errorf("retake = exit %d, last line %q; want exit %d, a line starting %q\n%s", code, lines[len(lines)-1], tt.wantCode, tt.wantLast, stderr.String())
			}
			if want := "record: re-taking 1 record and 1 trace at commit "; !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], "about ") {
				t.Errorf("first line = %q; want the estimate of the whole run, starting %q", lines[0], want)
			}
			if strings.Join(runs, "\n") != strings.Join(tt.wantRuns, "\n") {
				t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(runs, "\n"), strings.Join(tt.wantRuns, "\n"))
			}
		})
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`go run x -bench '^Benchmark(A|B)$' -n y`, []string{"go", "run", "x", "-bench", "^Benchmark(A|B)$", "-n", "y"}},
		{`a 'it'\''s' "q\"d" b\ c`, []string{"a", "it's", `q"d`, "b c"}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := splitCommand(tt.in)
		if err != nil || strings.Join(got, "\x00") != strings.Join(tt.want, "\x00") {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := splitCommand("a 'open"); err == nil {
		t.Errorf("splitCommand of an unterminated quote: no error")
	}
}

// TestRetakeRefusals: -retake refuses, before anything is built, an -out
// inside the repository, other flags, and a dirty tree.
func TestRetakeRefusals(t *testing.T) {
	root, _ := retakeRepo(t)
	tests := []struct {
		name  string
		dirty bool
		args  []string
		code  int
		want  string
	}{
		{"no -out", false, []string{"-retake"}, cli.ExitUsage, "record: -retake needs -out DIR, a directory outside the repository to write the edition into"},
		{"-out inside", false, []string{"-retake", "-out", filepath.Join(root, "book", "records")}, cli.ExitUsage, "record: -out " + filepath.Join(root, "book", "records") + " is inside the repository"},
		{"other flags", false, []string{"-retake", "-out", t.TempDir(), "-passes", "1"}, cli.ExitUsage, "record: -retake takes only -out and -force: each record's own command says the rest (not -passes)"},
		{"dirty tree", true, []string{"-retake", "-out", t.TempDir()}, cli.ExitFailed, "record: the tree has uncommitted changes (?? notes.md): an edition is taken from a clean tree at one commit, so commit them first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.dirty {
				p := filepath.Join(root, "notes.md")
				require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
				defer os.Remove(p)
			}
			var stdout, stderr strings.Builder
			code := run(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code || !strings.HasPrefix(stderr.String(), tt.want) {
				t.Errorf("record %q = exit %d, stderr\n%q\nwant exit %d and a line starting\n%q", tt.args, code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

// TestRetakeFixture re-takes the fixture's records and traces for real:
// fill is measured again and traced made again at HEAD, into -out's
// records and traces, the estimate is the first line, and the before
// editions and the transcription are named and left alone. What each
// writes keeps the command a reader re-runs: no -out, no -allow-dirty.
func TestRetakeFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fixture stage")
	}
	root, fixtureTrace := retakeRepo(t)
	out := filepath.Join(t.TempDir(), "edition")
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"-retake", "-out", out}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("record -retake = exit %d:\n%s", code, stderr.String())
	}
	lines := strings.Split(stderr.String(), "\n")
	if !strings.HasPrefix(lines[0], "record: re-taking 1 record and 1 trace at commit ") || !strings.Contains(lines[0], "about ") {
		t.Errorf("first line = %q; want the estimate of the whole run", lines[0])
	}
	for _, want := range []string{"not re-taken: record fill-before:", "not re-taken: record reference:", "not re-taken: trace traced-before:",
		"record 1 of 1: fill", "trace 1 of 1: traced", "edition complete: 1 record and 1 trace"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr.String())
		}
	}
	head := gitIn(t, root, "rev-parse", "HEAD")
	rec, err := records.Load(filepath.Join(out, "records", "fill.json"))
	require.NoError(t, err)
	if rec.Commit != head || rec.Dirty {
		t.Errorf("fill.json: commit %q, dirty %v; want %q, clean", rec.Commit, rec.Dirty, head)
	}
	if want := "go run ./tools/cmd/record -name fill -stages stage0-mailbox -bench '^BenchmarkFill$' -passes 1 -benchtime 5x -canary-benchtime 5x -canary-count 1"; rec.Command != want {
		t.Errorf("fill.json command = %q; want %q, the old command without any -out", rec.Command, want)
	}
	meta, err := trace.LoadMeta(filepath.Join(out, "traces", "traced.meta.json"))
	require.NoError(t, err)
	if meta.Commit != head {
		t.Errorf("traced.meta.json: commit %q; want %q, clean", meta.Commit, head)
	}
	if want := "go run ./tools/cmd/trace make -stage stage0-mailbox -bench '^BenchmarkTraced/leaf=a$' -name traced -benchtime 1x -env FIXTURE_TRACE=" + fixtureTrace; meta.Command != want {
		t.Errorf("traced.meta.json command = %q; want %q, the old command without -out or -allow-dirty", meta.Command, want)
	}
	if _, err := trace.Load(filepath.Join(out, "traces", "traced.json")); err != nil {
		t.Errorf("the re-made trace does not load: %v", err)
	}
	for dir, want := range map[string]int{"records": 2, "traces": 2} {
		entries, _ := os.ReadDir(filepath.Join(out, dir))
		if len(entries) != want {
			t.Errorf("%s/%s holds %d files; want %d (NAME.json and its companion)", out, dir, len(entries), want)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 2 {
		t.Errorf("%s holds %d entries; want records and traces alone, as book/ holds them", out, len(entries))
	}
}
