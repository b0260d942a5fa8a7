package book

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/records"
)

// fixtureRoot is a miniature repository: two stages and a book that uses
// every directive.
const fixtureRoot = "testdata/repo"

func fixtureConfig(t testing.TB) Config {
	t.Helper()
	root, err := filepath.Abs(fixtureRoot)
	require.NoError(t, err)
	return Config{
		Root:    root,
		BookDir: filepath.Join(root, "book"),
		OutDir:  t.TempDir(),
		Title:   "fixture",
		Differ:  &StagesDiffer{Root: root},
	}
}

// newTestBuilder returns a builder over the fixture, for calling directive
// handlers directly.
func newTestBuilder(t testing.TB) *builder {
	t.Helper()
	cfg := fixtureConfig(t)
	hl := newHighlighter()
	return &builder{cfg: cfg, hl: hl, md: &markdown{hl: hl}, records: &recordSet{dir: filepath.Join(cfg.BookDir, "records"), cache: map[string]*records.Record{}}, included: map[string]bool{}}
}

// expand runs the directive expander over one chapter's text.
func expand(t testing.TB, b *builder, src string) expansion {
	t.Helper()
	return expandDirectives("book/test.md", []byte(src), b.handlers("", "", false))
}

// expandOK expands src and fails the test on any directive error, returning
// the Markdown and every block's HTML joined.
func expandOK(t testing.TB, b *builder, src string) (md, blocks string) {
	t.Helper()
	x := expand(t, b, src)
	for _, err := range x.Errs {
		t.Errorf("expand(%q): %v", src, err)
	}
	return string(x.Markdown), strings.Join(x.Blocks, "\n")
}

// checkBlocks expands src and checks what came of it: with wantErr, one
// error and that containing wantErr; without, no error and every string of
// want in the blocks' HTML. what names the directive in failures.
func checkBlocks(t *testing.T, b *builder, src string, want []string, wantErr, what string) {
	t.Helper()
	x := expand(t, b, src)
	if wantErr != "" {
		if len(x.Errs) != 1 || !strings.Contains(x.Errs[0].Error(), wantErr) {
			t.Fatalf("errors = %v; want one containing %q", x.Errs, wantErr)
		}
		return
	}
	for _, err := range x.Errs {
		t.Fatal(err)
	}
	html := strings.Join(x.Blocks, "")
	for _, w := range want {
		if !strings.Contains(html, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, html[:min(len(html), 3000)])
		}
	}
}

// writeBook writes files (path → contents) into a new book directory and
// returns a config building it against the fixture repository.
func writeBook(t testing.TB, files map[string]string) Config {
	t.Helper()
	cfg := fixtureConfig(t)
	cfg.BookDir = t.TempDir()
	for name, text := range files {
		p := filepath.Join(cfg.BookDir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	return cfg
}
