package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
	"softgpu/tools/internal/records"
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

// retakeRepo is a fixture repository, committed, whose book/records holds
// a measured record (fill), one kept as its "before" edition (fill-before,
// whose command writes fill.json) and a transcription (reference).
func retakeRepo(t *testing.T) string {
	t.Helper()
	root := fixture.Repo(t, "stage0-mailbox")
	recs := filepath.Join(root, "book", "records")
	fakeRecord(t, recs, "fill", "go run ./tools/cmd/record -out /tmp/old -name fill -stages stage0-mailbox -bench '^BenchmarkFill$' -passes 1 -benchtime 5x -canary-benchtime 5x -canary-count 1", false)
	fakeRecord(t, recs, "fill-before", "go run ./tools/cmd/record -name fill -stages stage0-mailbox -bench '^BenchmarkFill$' -passes 1", false)
	fakeRecord(t, recs, "reference", "", true)
	gitRepo(t, root)
	t.Chdir(root)
	return root
}

func TestRetakePlan(t *testing.T) {
	root := retakeRepo(t)
	items, kept, err := retakePlan(filepath.Join(root, "book", "records"), "/tmp/edition")
	require.NoError(t, err)
	if len(items) != 1 || items[0].name != "fill" {
		t.Fatalf("retakePlan re-takes %+v; want fill alone", items)
	}
	want := "-name fill -stages stage0-mailbox -bench ^BenchmarkFill$ -passes 1 -benchtime 5x -canary-benchtime 5x -canary-count 1 -out /tmp/edition"
	if got := strings.Join(items[0].args, " "); got != want {
		t.Errorf("fill's args = %q; want %q (the old -out dropped, the edition's added)", got, want)
	}
	wantKept := []string{
		`fill-before: kept as the "before" edition of fill (its command writes fill.json), not re-taken`,
		"reference: a transcription (seed 004), not a measurement of this tree",
	}
	if strings.Join(kept, "\n") != strings.Join(wantKept, "\n") {
		t.Errorf("kept = %q; want %q", kept, wantKept)
	}
	if items[0].estimate <= 0 {
		t.Errorf("estimate = %v; want a positive duration", items[0].estimate)
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
	root := retakeRepo(t)
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

// TestRetakeFixture re-takes the fixture's records for real: fill is
// measured again at HEAD into -out, the estimate is the first line, and
// the before-edition and the transcription are named and left alone.
func TestRetakeFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a fixture stage")
	}
	root := retakeRepo(t)
	out := filepath.Join(t.TempDir(), "edition")
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"-retake", "-out", out}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("record -retake = exit %d:\n%s", code, stderr.String())
	}
	lines := strings.Split(stderr.String(), "\n")
	if !strings.HasPrefix(lines[0], "record: re-taking 1 record at commit ") || !strings.Contains(lines[0], "about ") {
		t.Errorf("first line = %q; want the estimate of the whole run", lines[0])
	}
	for _, want := range []string{"not re-taken: fill-before:", "not re-taken: reference:", "record 1 of 1: fill", "edition complete: 1 records"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr.String())
		}
	}
	rec, err := records.Load(filepath.Join(out, "fill.json"))
	require.NoError(t, err)
	if head := gitIn(t, root, "rev-parse", "HEAD"); rec.Commit != head || rec.Dirty {
		t.Errorf("fill.json: commit %q, dirty %v; want %q, clean", rec.Commit, rec.Dirty, head)
	}
	if !strings.HasSuffix(rec.Command, "-out "+out) || !strings.Contains(rec.Command, "-name fill") {
		t.Errorf("fill.json command = %q; want the old command with -out %s", rec.Command, out)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 2 {
		t.Errorf("%s holds %d files; want fill.json and fill.txt alone", out, len(entries))
	}
}
