package main

// This file is -retake: one command that re-takes every record and every
// trace the book uses, for one edition at one commit. It reads
// book/records/*.json, then book/traces/*.meta.json, and runs each one's
// own kept command again, in this process (record's run, trace make's
// package), with -out replaced by the edition's directory for its kind,
// OUT/records or OUT/traces, so that installing the edition is one copy
// of those two into book/. -allow-dirty is dropped too: a retake starts
// from a clean tree, and a trace made from one should not say otherwise.
// Nothing else of the command changes, so each is re-made exactly as it
// was first made.
//
// Not re-taken, and said so before anything runs:
//
//   - a transcription (marked "transcribed": reference.json, the reference
//     machine's figures, and machine-notes.json, the probes of the machine
//     notes), whose figures were copied from a document, not measured here;
//   - a record or trace kept as "before": its command writes one of
//     another name (idle-before.json's command says -name idle), so it is
//     an earlier edition of that one, kept on purpose to show what a
//     change did. Re-running its command would only measure today's code
//     a second time.
//
// Invariants: the tree is clean when -retake starts (every record and
// trace of the edition names the one commit it measured), and -out lies
// outside the repository, so writing one cannot make the tree dirty for
// the next. The first line printed is the estimate of the whole run.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/record"
	"softgpu/tools/internal/records"
	"softgpu/tools/internal/trace"
	"softgpu/tools/internal/tracemake"
)

// recordCommand is how every record's command starts.
const recordCommand = "go run ./tools/cmd/record"

// retakeKind is one kind of thing an edition holds.
type retakeKind struct {
	noun    string // "record" or "trace", as the progress names one
	dir     string // where the book keeps them (book/DIR) and the edition writes them (OUT/DIR)
	command string // how every one's kept command starts
}

var (
	recordKind = &retakeKind{noun: "record", dir: "records", command: recordCommand}
	traceKind  = &retakeKind{noun: "trace", dir: "traces", command: tracemake.Command}
)

// retakeItem is one record or trace of the edition and the arguments that
// re-take it.
type retakeItem struct {
	kind     *retakeKind
	name     string
	args     []string      // its kept command's arguments, -out replaced, -allow-dirty dropped
	estimate time.Duration // recordEstimate or traceEstimate
}

// A retakeRunner runs one item's command with its arguments and returns
// the exit code. Tests give retake a fake one.
type retakeRunner func(ctx context.Context, it retakeItem, stdout, stderr io.Writer) int

// runRetakeItem is the runner of a real retake: a record by this
// command's own run, a trace by trace make, both in this process.
func runRetakeItem(ctx context.Context, it retakeItem, stdout, stderr io.Writer) int {
	if it.kind == traceKind {
		return tracemake.Make.Run(ctx, cli.NewCommand("trace make", tracemake.Make.Usage, stdout, stderr), it.args)
	}
	return run(ctx, it.args, stdout, stderr)
}

// retakePlan reads every record and trace of the book under root and sorts
// them into those to re-take into out (records by name, then traces by
// name) and those kept as they are, with the reason for each.
func retakePlan(root, out string) (items []retakeItem, kept []string, err error) {
	// add plans one record or trace that has a command.
	add := func(kind *retakeKind, name, command string, estimate time.Duration) error {
		it, keptAs, err := planItem(kind, name, command, out)
		switch {
		case err != nil:
			return err
		case keptAs != "":
			kept = append(kept, keptAs)
		default:
			it.estimate = estimate
			items = append(items, it)
		}
		return nil
	}

	recordDir := filepath.Join(root, "book", recordKind.dir)
	recs, err := records.LoadDir(recordDir)
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("no records in %s", recordDir)
	}
	for _, name := range sortedKeys(recs) {
		rec := recs[name]
		if rec.Transcribed || rec.Command == "" {
			kept = append(kept, fmt.Sprintf("record %s: a transcription (%s), not a measurement of this tree", name, orText(rec.Source, "no command")))
			continue
		}
		if err := add(recordKind, name, rec.Command, recordEstimate(rec)); err != nil {
			return nil, nil, err
		}
	}

	traceDir := filepath.Join(root, "book", traceKind.dir)
	metas, err := loadMetas(traceDir)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range sortedKeys(metas) {
		if metas[name].Command == "" {
			kept = append(kept, fmt.Sprintf("trace %s: no command says how it was made", name))
			continue
		}
		if err := add(traceKind, name, metas[name].Command, traceEstimate(filepath.Join(traceDir, name+".json"))); err != nil {
			return nil, nil, err
		}
	}
	return items, kept, nil
}

// planItem turns the command kept with kind's name into the arguments that
// re-take it into out. The command must start with kind's own; its -out
// (where it last wrote) and -allow-dirty (a retake starts from a clean
// tree) are dropped and OUT/DIR added. A command whose -name is another's
// makes that one: this is its "before" edition, and keptAs says so.
func planItem(kind *retakeKind, name, command, out string) (it retakeItem, keptAs string, err error) {
	words, err := splitCommand(command)
	if err != nil {
		return it, "", fmt.Errorf("%s %s: command %q: %w", kind.noun, name, command, err)
	}
	prefix := strings.Fields(kind.command)
	if len(words) < len(prefix) || strings.Join(words[:len(prefix)], " ") != kind.command {
		return it, "", fmt.Errorf("%s %s: command %q does not start with %q", kind.noun, name, command, kind.command)
	}
	args := cli.WithoutFlag(cli.WithoutFlag(words[len(prefix):], "out", true), "allow-dirty", false)
	if target := flagValue(args, "name"); target != name {
		return it, fmt.Sprintf("%s %s: kept as the \"before\" edition of %s (its command writes %s.json), not re-taken", kind.noun, name, target, target), nil
	}
	return retakeItem{kind: kind, name: name, args: append(args, "-out", filepath.Join(out, kind.dir))}, "", nil
}

// loadMetas reads every NAME.meta.json in dir, by NAME; no dir is no
// traces.
func loadMetas(dir string) (map[string]*trace.Meta, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.meta.json"))
	if err != nil {
		return nil, err
	}
	metas := make(map[string]*trace.Meta, len(paths))
	for _, p := range paths {
		meta, err := trace.LoadMeta(p)
		if err != nil {
			return nil, err
		}
		metas[strings.TrimSuffix(filepath.Base(p), ".meta.json")] = meta
	}
	return metas, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// recordEstimate is how long re-taking rec should take: every row, in
// every pass, for its benchtime (a count such as 100x is taken as one
// second), plus the two pass canaries. Re-runs come on top.
func recordEstimate(rec *records.Record) time.Duration {
	per := time.Second
	if bt, err := benchrun.ParseBenchtime(rec.Settings.Benchtime); err == nil && bt.Duration > 0 {
		per = bt.Duration
	}
	passes := max(rec.Settings.Passes, 1)
	rows := len(rec.Rows) + len(rec.Limits)
	return time.Duration(passes) * (time.Duration(rows)*per + 2*time.Second)
}

// traceEstimate is how long re-making the trace at path should take: as
// long as its benchmark ran when it was last made, which the trace spans
// (the life of the device that wrote it), but at least traceStart. A
// stage's build from a cold cache comes on top, as it does for a record.
func traceEstimate(path string) time.Duration {
	estimate := traceStart
	if t, err := trace.Load(path); err == nil {
		first, last := t.Span()
		estimate = max(estimate, last-first)
	}
	return estimate
}

// traceStart is the least a trace takes: go test vets the stage, links its
// test binary and starts it before the benchmark runs. The book's traces
// each span under a second of benchmark, so this is most of their time.
const traceStart = 5 * time.Second

// flagValue returns the value of -name VALUE or -name=VALUE in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// errQuote is a command whose quotes do not close.
var errQuote = errors.New("unterminated quote")

// splitCommand splits a command line as a POSIX shell would, for the
// quoting cli.Quote writes: words separated by blanks, '...' taken
// literally, "..." with \" and \\ escapes, and \ escaping one character.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errQuote
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errQuote
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// retake re-takes every record and trace of the book into out, running
// each with runItem (see the file comment).
func retake(ctx context.Context, c *cli.Command, root, out string, force bool, runItem retakeRunner) int {
	if out == "" {
		return c.Misuse("-retake needs -out DIR, a directory outside the repository to write the edition into")
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return c.Fail(err)
	}
	if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return c.Misuse("-out %s is inside the repository: each record and trace is taken from a clean tree, and writing one there would make the tree dirty for the next; write the edition outside it and copy it into book/ afterwards", out)
	}
	if err := records.ProbeDir(abs); err != nil {
		return c.Misuse("-out %s: %v", out, err)
	}
	if changes, known := record.Changes(ctx, root); known && len(changes) > 0 {
		c.Printf("the tree has uncommitted changes (%s): an edition is taken from a clean tree at one commit, so commit them first", summarise(changes, 4))
		return cli.ExitFailed
	}
	items, kept, err := retakePlan(root, abs)
	if err != nil {
		return c.Fail(err)
	}
	var total time.Duration
	planned := map[*retakeKind]int{}
	for _, it := range items {
		total += it.estimate
		planned[it.kind]++
	}
	count := func(done map[*retakeKind]int) string {
		return fmt.Sprintf("%d %s and %d %s", done[recordKind], plural(done[recordKind], "record", "records"), done[traceKind], plural(done[traceKind], "trace", "traces"))
	}
	commit := record.Head(ctx, root)
	c.Printf("re-taking %s at commit %s into %s: at least about %s in all (a record's rows × passes × benchtime, a trace as long as it ran last time, at least %s; builds, the benchmarks' own warm-up and any re-runs come on top, and each record gives its own estimate as it starts)",
		count(planned), shortHash(commit), abs, benchrun.Approx(total), benchrun.Approx(traceStart))
	for _, k := range kept {
		c.Printf("not re-taken: %s", k)
	}
	left := total
	done := map[*retakeKind]int{}
	for _, it := range items {
		if force && it.kind == recordKind { // trace make has no -force: it never refuses to replace a file
			it.args = append(it.args, "-force")
		}
		c.Printf("%s %d of %d: %s, about %s (about %s left): %s", it.kind.noun, done[it.kind]+1, planned[it.kind], it.name,
			benchrun.Approx(it.estimate), benchrun.Approx(left), cli.CommandLine(it.kind.command, it.args))
		if code := runItem(ctx, it, c.Stdout, c.Stderr); code != cli.ExitOK {
			c.Printf("%s %s failed (exit %d): the edition is incomplete; %d of %d records and %d of %d traces are in %s",
				it.kind.noun, it.name, code, done[recordKind], planned[recordKind], done[traceKind], planned[traceKind], abs)
			return code
		}
		if head := record.Head(ctx, root); head != commit {
			c.Printf("HEAD moved from %s to %s while re-taking: an edition is one commit; start again", shortHash(commit), shortHash(head))
			return cli.ExitFailed
		}
		done[it.kind]++
		left -= it.estimate
	}
	c.Printf("edition complete: %s at commit %s in %s; install it with cp -r %s %s book/ and build the book with -edition",
		count(done), shortHash(commit), abs, cli.Quote(filepath.Join(abs, recordKind.dir)), cli.Quote(filepath.Join(abs, traceKind.dir)))
	return cli.ExitOK
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
