package book

import (
	"bytes"
	"context"
	"fmt"
	"go/scanner"
	"go/token"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"softgpu/tools/internal/records"
)

// This file tells a reader when a record is older than the code it
// measured. A record names its commit and the stages it measured; the
// build asks git which later commits changed the non-test code of those
// stages (not *_test.go, not testdata, not Markdown, not internal/leakcheck,
// which only tests import; merges left out, since
// the commits they bring are listed themselves), and prints that list
// — short hash and subject, computed, never typed — under every table and
// chart fed by such a stale record, at the end of a page whose inline
// figures come from one, and in the records appendix.
//
// A commit that changed only comments and layout is left out too: if
// every file of the record's stages it touched is a Go file whose tokens,
// comments skipped, are the same before and after (go/scanner), the
// compiler was given the same program, and the record still measures it.
// So a false comment can be corrected without re-taking the records; a
// change to one token of code, or to any other kind of file, counts.
//
// Printing is automatic; the check behind it is the guard. After a
// chapter is rendered, every stale record the chapter read (through
// recordSet.get, the one way a directive reaches a record) must have its
// list in the page's HTML, marked data-stale-record="NAME"; a page that
// reads a stale record without printing it fails the build. With
// Config.Edition (go run ./tools/cmd/book -edition) any stale record at
// all fails the build: CI turns that on once the records are re-taken at
// one commit (go run ./tools/cmd/record -retake).
//
// A record kept as the "before" edition of another (its command writes a
// record of another name: idle-before.json's writes idle.json) is stale by
// design: its list is still printed, and -edition does not refuse it.
//
// Without git, or for a commit git does not know (a shallow clone, a test
// fixture), staleness is unknown: the default build says nothing, and
// -edition fails, since it cannot show that the records are current.

// staleCommit is one commit after a record's that changed code it measured.
type staleCommit struct {
	Hash, Subject string
}

// staleness is what git says of one record.
type staleness struct {
	known   bool          // git answered for the record's commit
	commits []staleCommit // newest first; empty when the record is current
	err     error         // why known is false, for -edition's message
}

func (s staleness) stale() bool { return s.known && len(s.commits) > 0 }

// staleChecker caches git's answer per record.
type staleChecker struct {
	root  string // the repository
	cache map[string]staleness
}

// nonTestExcludes are the pathspecs that leave only a stage's non-test
// code. internal/leakcheck is test code in a plain file: only tests import
// it (a package's _test.go files cannot be imported by another package's).
var nonTestExcludes = []string{":(exclude,glob)**/*_test.go", ":(exclude,glob)**/testdata/**", ":(exclude,glob)**/*.md", ":(exclude,glob)**/internal/leakcheck/**"}

// recordStageDirs is the stages a record measured: its settings' list, or
// the stages of its rows.
func recordStageDirs(rec *records.Record) []string {
	if len(rec.Settings.Stages) > 0 {
		return rec.Settings.Stages
	}
	seen := map[string]bool{}
	var out []string
	for _, rows := range [][]records.Row{rec.Rows, rec.Limits} {
		for _, r := range rows {
			if r.Stage != "" && !seen[r.Stage] {
				seen[r.Stage] = true
				out = append(out, r.Stage)
			}
		}
	}
	sort.Strings(out)
	return out
}

// of returns the staleness of rec. A transcription (no commit) is never stale.
func (sc *staleChecker) of(rec *records.Record) staleness {
	if sc == nil {
		return staleness{err: fmt.Errorf("no repository to ask")}
	}
	if s, ok := sc.cache[rec.Name]; ok {
		return s
	}
	s := sc.compute(rec)
	sc.cache[rec.Name] = s
	return s
}

func (sc *staleChecker) compute(rec *records.Record) staleness {
	commit, _, _ := strings.Cut(rec.Commit, "+") // schema 1 wrote "+dirty"
	if rec.Transcribed || commit == "" {
		return staleness{known: true}
	}
	if sc.root == "" {
		return staleness{err: fmt.Errorf("no repository to ask")}
	}
	if _, err := sc.git("cat-file", "-e", commit+"^{commit}"); err != nil {
		return staleness{err: fmt.Errorf("git does not know its commit %s (a shallow clone?)", shortCommit(commit))}
	}
	args := append([]string{"log", "--no-merges", "--format=%h%x09%s", commit + "..HEAD", "--"}, recordStageDirs(rec)...)
	out, err := sc.git(append(args, nonTestExcludes...)...)
	if err != nil {
		return staleness{err: err}
	}
	s := staleness{known: true}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		hash, subject, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		same, err := sc.commentsOnly(hash, recordStageDirs(rec))
		if err != nil {
			return staleness{err: err}
		}
		if !same {
			s.commits = append(s.commits, staleCommit{Hash: hash, Subject: subject})
		}
	}
	return s
}

// commentsOnly reports whether commit hash changed, in the non-test code of
// stages, nothing but comments and layout: every file it touched there is
// a Go file, present before and after, with the same tokens.
func (sc *staleChecker) commentsOnly(hash string, stages []string) (bool, error) {
	args := append([]string{"diff-tree", "--no-commit-id", "-r", "--name-status", hash + "^", hash, "--"}, stages...)
	out, err := sc.git(append(args, nonTestExcludes...)...)
	if err != nil {
		return false, err
	}
	files := strings.Split(strings.TrimSpace(out), "\n")
	if len(files) == 0 || files[0] == "" {
		return false, nil // git log listed it; count it rather than guess
	}
	for _, f := range files {
		status, name, _ := strings.Cut(f, "\t")
		if status != "M" || path.Ext(name) != ".go" {
			return false, nil // added, deleted, renamed, or not Go
		}
		before, err := sc.git("show", hash+"^:"+name)
		if err != nil {
			return false, err
		}
		after, err := sc.git("show", hash+":"+name)
		if err != nil {
			return false, err
		}
		if !sameTokens(before, after) {
			return false, nil
		}
	}
	return true, nil
}

// sameTokens reports whether two Go sources scan to the same tokens with
// comments skipped. A file that does not scan cleanly is never the same.
func sameTokens(a, b string) bool {
	ta, okA := goTokens(a)
	tb, okB := goTokens(b)
	if !okA || !okB || len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != tb[i] {
			return false
		}
	}
	return true
}

// goToken is one token of a Go source, without its position.
type goToken struct {
	tok token.Token
	lit string
}

// goTokens scans src; ok is false if the scanner reported an error, or
// if src uses cgo, whose preamble is a comment the compiler reads. The
// comments a compiler or the go command reads (//go:, //line, //export,
// //extern, // +build) are kept as tokens.
func goTokens(src string) (toks []goToken, ok bool) {
	var s scanner.Scanner
	errors := 0
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	s.Init(file, []byte(src), func(token.Position, string) { errors++ }, scanner.ScanComments)
	for {
		_, tok, lit := s.Scan()
		switch {
		case tok == token.EOF:
			return toks, errors == 0
		case tok == token.COMMENT && !compilerComment(lit):
			continue
		case tok == token.SEMICOLON && lit == "\n":
			lit = ";" // an inserted semicolon: where the line broke is layout
		case tok == token.STRING && lit == `"C"` && len(toks) > 0 && toks[len(toks)-1].tok == token.IMPORT:
			return nil, false
		case (tok == token.RBRACE || tok == token.RPAREN) && len(toks) > 0 && toks[len(toks)-1].tok == token.SEMICOLON:
			toks = toks[:len(toks)-1] // the spec lets it be left out, so it is layout too
		}
		toks = append(toks, goToken{tok, lit})
	}
}

// compilerComment reports whether a comment is one that the compiler or the go
// command reads.
func compilerComment(comment string) bool {
	for _, p := range []string{"//go:", "//line ", "/*line ", "//export ", "//extern ", "// +build"} {
		if strings.HasPrefix(comment, p) {
			return true
		}
	}
	return false
}

func (sc *staleChecker) git(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", sc.root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// beforeEdition reports whether rec is kept as an earlier edition of
// another record: its command writes a record of another -name.
func beforeEdition(rec *records.Record) (of string, ok bool) {
	fields := strings.Fields(rec.Command)
	for i, f := range fields {
		f = strings.TrimPrefix(strings.TrimPrefix(f, "-"), "-")
		name := ""
		if f == "name" && i+1 < len(fields) {
			name = fields[i+1]
		} else if v, found := strings.CutPrefix(f, "name="); found {
			name = v
		}
		if name != "" {
			name = strings.Trim(name, `'"`)
			return name, name != rec.Name
		}
	}
	return "", false
}

// staleMarker is the attribute that shows a page printed rec's list.
func staleMarker(name string) string {
	return `data-stale-record="` + escapeHTML(name) + `"`
}

// staleNote is the list printed under a figure fed by rec, or "" when rec
// is current (or git cannot say).
func (b *builder) staleNote(rec *records.Record) string {
	if rec == nil {
		return ""
	}
	s := b.stale.of(rec)
	if !s.stale() {
		return ""
	}
	if b.printedStale == nil {
		b.printedStale = map[string]bool{}
	}
	what := "the stages it measured"
	if st := recordStageDirs(rec); len(st) == 1 {
		what = st[0]
	}
	if b.printedStale[rec.Name] {
		// Once a page: later figures from the record point back to it.
		return fmt.Sprintf(`<p class="stale" %s>%s.json was taken at commit <code>%s</code>, before %d later %s to the non-test code of %s, listed under the first figure from it above.</p>`+"\n",
			staleMarker(rec.Name), escapeHTML(rec.Name), escapeHTML(shortCommit(rec.Commit)), len(s.commits), plural(len(s.commits), "change", "changes"), escapeHTML(what))
	}
	b.printedStale[rec.Name] = true
	var out strings.Builder
	open := ""
	if b.printing {
		open = " open" // paper cannot be clicked
	}
	fmt.Fprintf(&out, `<details class="stale"%s %s><summary>%s.json was taken at commit <code>%s</code>; %d later %s changed the non-test code of %s (from git log, when this page was built)`,
		open, staleMarker(rec.Name), escapeHTML(rec.Name), escapeHTML(shortCommit(rec.Commit)), len(s.commits), plural(len(s.commits), "commit", "commits"), escapeHTML(what))
	if of, ok := beforeEdition(rec); ok {
		fmt.Fprintf(&out, `, on purpose: it is kept as the “before” edition of %s.json`, escapeHTML(of))
	}
	out.WriteString("</summary>\n<ul>\n")
	for _, c := range s.commits {
		fmt.Fprintf(&out, "<li><code>%s</code> %s</li>\n", escapeHTML(c.Hash), escapeHTML(c.Subject))
	}
	out.WriteString("</ul></details>\n")
	return out.String()
}

// staleTitle is what an inline figure's tooltip adds for a stale record.
func (b *builder) markStale(v *inlineValue, recs ...*records.Record) {
	for _, rec := range recs {
		if rec == nil || !b.stale.of(rec).stale() {
			continue
		}
		if !strings.Contains(v.Class, "stale") {
			v.Class += " stale"
		}
		n := len(b.stale.of(rec).commits)
		v.Title += fmt.Sprintf("; %s.json predates %d %s to the code it measured, listed at the end of the page", rec.Name, n, plural(n, "change", "changes"))
	}
}

// pageStaleNotes is the section closing a page: the lists of the stale
// records the page read that no table or chart above has printed.
func (b *builder) pageStaleNotes() string {
	var names []string
	for name := range b.records.used {
		if !b.printedStale[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var notes strings.Builder
	for _, name := range names {
		rec, err := b.records.get(name)
		if err == nil {
			notes.WriteString(b.staleNote(rec))
		}
	}
	if notes.Len() == 0 {
		return ""
	}
	return "<section class=\"stale-records\">\n<h2>Records taken before later changes</h2>\n" +
		"<p>Figures in the text above come from these records; the code they measured changed afterwards.</p>\n" +
		notes.String() + "</section>\n"
}

// checkStale is the guard: every stale record the page read has its list in
// html; with -edition, no record the page read may be stale at all (bar a
// "before" edition), nor of unknown staleness.
func (b *builder) checkStale(source string, html []byte) []error {
	var names []string
	for name := range b.records.used {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		rec, err := b.records.get(name)
		if err != nil {
			continue
		}
		s := b.stale.of(rec)
		_, before := beforeEdition(rec)
		switch {
		case s.stale() && !bytes.Contains(html, []byte(staleMarker(name))):
			errs = append(errs, fmt.Errorf("%s: uses record %s.json, taken before %d later %s to the code it measured, but the page does not print them", source, name, len(s.commits), plural(len(s.commits), "change", "changes")))
		case b.cfg.Edition && before:
		case b.cfg.Edition && s.stale():
			errs = append(errs, fmt.Errorf("%s: -edition: record %s.json is stale: %d later %s changed the non-test code it measured (newest %s %s); re-take the records with go run ./tools/cmd/record -retake", source, name, len(s.commits), plural(len(s.commits), "commit", "commits"), s.commits[0].Hash, s.commits[0].Subject))
		case b.cfg.Edition && !s.known:
			errs = append(errs, fmt.Errorf("%s: -edition: cannot tell whether record %s.json is current: %v", source, name, s.err))
		}
	}
	return errs
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
