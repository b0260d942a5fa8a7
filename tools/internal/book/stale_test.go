package book

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/records"
)

// staleRepo is a git repository with one stage and a book whose chapter
// shows a figure of record r, taken at the first commit; after it come a
// change to the stage's code, one to its comments and layout only, one to
// its test, one to its README and one to another stage. It
// returns the config and the subject of the code change.
func staleRepo(t *testing.T) (Config, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", root, "-c", "user.email=t@example.com", "-c", "user.name=test"}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %q: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write("stage7-idle/idle.go", "package idle\n")
	write("stage4-nolock/other.go", "package other\n")
	write("book/SUMMARY.md", "# Summary\n\n- [Chapter](ch.md)\n")
	write("book/ch.md", "# Chapter\n\nIt takes {{#value record=r stage=stage7-idle bench=Gap unit=ns/op}}.\n\n{{#table record=r stage=stage7-idle unit=ns/op}}\n")
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "first")
	rec := &records.Record{Schema: records.SchemaVersion, Name: "r", Date: "2026-12-01T00:00:00Z", Commit: git("rev-parse", "HEAD"),
		Command:  "go run ./tools/cmd/record -name r -stages stage7-idle",
		Settings: records.Settings{Stages: []string{"stage7-idle"}, Passes: 1},
		Rows:     []records.Row{{Stage: "stage7-idle", Benchmark: "Gap", Metrics: []records.Metric{records.NewMetric("ns/op", []float64{1000})}}}}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "book", "records"), 0o755))
	require.NoError(t, records.Save(filepath.Join(root, "book", "records", "r.json"), rec))
	git("add", "-A")
	git("commit", "-qm", "the record")
	for _, c := range []struct{ file, subject, text string }{
		{"stage7-idle/idle.go", "idle: sleep sooner", "package idle\n\nconst budget = 1\n"},
		{"stage7-idle/idle.go", "idle: a comment corrected, the code laid out anew", "package idle\n\n// budget is right.\nconst budget = /* cycles */ 1\n"},
		{"stage7-idle/idle_test.go", "idle: a test only", "package idle\n"},
		{"stage7-idle/README.md", "idle: words only", "words\n"},
		{"stage4-nolock/other.go", "nolock: another stage", "package other\n\nconst x = 2\n"},
	} {
		write(c.file, c.text)
		git("add", "-A")
		git("commit", "-qm", c.subject)
	}
	cfg := Config{Root: root, BookDir: filepath.Join(root, "book"), OutDir: t.TempDir(), Title: "t"}
	return cfg, "idle: sleep sooner"
}

// TestStaleRecord: a page using a record taken before a change to the code
// it measured prints that change (and only it: not the test, the README or
// another stage), computed from git; -edition refuses the record.
func TestStaleRecord(t *testing.T) {
	cfg, subject := staleRepo(t)
	site, err := Render(cfg)
	require.NoError(t, err)
	page := string(site.Files["ch.html"])
	for _, want := range []string{`data-stale-record="r"`, "1 later commit changed the non-test code of stage7-idle", subject} {
		if !strings.Contains(page, want) {
			t.Errorf("ch.html lacks %q", want)
		}
	}
	for _, not := range []string{"a comment corrected", "a test only", "words only", "another stage"} {
		if strings.Contains(page, not) {
			t.Errorf("ch.html lists the commit %q, which changed no non-test code of the record's stages", not)
		}
	}
	if !strings.Contains(page, `class="figure stale"`) {
		t.Errorf("the inline figure is not marked stale")
	}
	// Under the table: inside its figure, after the reproduce line.
	table := page[strings.Index(page, `<figure class="record-table">`):]
	table = table[:strings.Index(table, "</figure>")]
	if !strings.Contains(table, `<details class="stale" data-stale-record="r">`) {
		t.Errorf("the table's figure does not end with the record's list of later commits:\n%s", table)
	}
	if print := string(site.Files["print.html"]); !strings.Contains(print, `<details class="stale" open data-stale-record="r">`) {
		t.Errorf("print.html does not print the list open")
	}
	if n := strings.Count(page, subject); n != 1 {
		t.Errorf("the commit is listed %d times on the page; want once, under the table, the rest pointing to it", n)
	}

	cfg.Edition = true
	_, err = Render(cfg)
	if err == nil || !strings.Contains(err.Error(), "-edition: record r.json is stale: 1 later commit changed the non-test code it measured (newest") {
		t.Errorf("Render(-edition) = %v; want the stale record refused", err)
	}
}

// TestStaleGuard: a page that reads a stale record and does not print its
// commits fails, whatever path bypassed the printing.
func TestStaleGuard(t *testing.T) {
	cfg, _ := staleRepo(t)
	b := &builder{cfg: cfg, records: &recordSet{dir: filepath.Join(cfg.BookDir, "records"), cache: map[string]*records.Record{}, used: map[string]bool{}},
		stale: &staleChecker{root: cfg.Root, cache: map[string]staleness{}}}
	if _, err := b.records.get("r"); err != nil {
		t.Fatal(err)
	}
	errs := b.checkStale("book/ch.md", []byte("<p>a figure from r, and no list</p>"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "book/ch.md: uses record r.json, taken before 1 later change to the code it measured, but the page does not print them") {
		t.Errorf("checkStale = %v; want the page refused", errs)
	}
	if errs := b.checkStale("book/ch.md", []byte(b.pageStaleNotes())); len(errs) != 0 {
		t.Errorf("checkStale after pageStaleNotes = %v; want none", errs)
	}
}

// TestBeforeEdition: a record whose command writes another name is kept as
// that record's earlier edition.
func TestBeforeEdition(t *testing.T) {
	for _, tt := range []struct {
		name, command, of string
		before            bool
	}{
		{"idle-before", "go run ./tools/cmd/record -out /tmp/x -name idle -stages stage7-idle", "idle", true},
		{"idle", "go run ./tools/cmd/record -name idle", "idle", false},
		{"reference", "", "", false},
	} {
		of, before := beforeEdition(&records.Record{Name: tt.name, Command: tt.command})
		if of != tt.of || before != tt.before {
			t.Errorf("beforeEdition(%s) = %q, %v; want %q, %v", tt.name, of, before, tt.of, tt.before)
		}
	}
}

// TestSameTokens: comments and line breaks are layout; a token of code, a
// comment the compiler reads, or a cgo preamble is not.
func TestSameTokens(t *testing.T) {
	base := "package p\n\n// F is one.\nfunc F() int { return 1 }\n"
	for _, c := range []struct {
		name, other string
		same        bool
	}{
		{"a comment reworded", "package p\n\n// F returns one, always.\nfunc F() int { return 1 }\n", true},
		{"a comment added inside", "package p\n\nfunc F() int {\n\t// one\n\treturn 1\n}\n", true},
		{"a literal changed", "package p\n\n// F is one.\nfunc F() int { return 2 }\n", false},
		{"an identifier changed", "package p\n\n// F is one.\nfunc G() int { return 1 }\n", false},
		{"a directive added", "package p\n\n// F is one.\n//go:noinline\nfunc F() int { return 1 }\n", false},
		{"a comment that ends a return", "package p\n\nfunc F() int { return /*\n*/ 1 }\n", false},
		{"does not scan", "package p\n\nfunc F() int { return 1 }\n`", false},
	} {
		if got := sameTokens(base, c.other); got != c.same {
			t.Errorf("%s: sameTokens = %v; want %v", c.name, got, c.same)
		}
	}
	cgo := "package p\n\n// #include <stdio.h>\nimport \"C\"\n"
	if sameTokens(cgo, cgo) {
		t.Errorf("a cgo file is the same as itself by tokens; want never, since its preamble is a comment the compiler reads")
	}
}
