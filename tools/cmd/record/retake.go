package main

// This file is -retake: one command that re-takes every record the book
// uses, for one edition at one commit. It reads book/records/*.json and
// runs each record's own recorded command again, in this process, with
// -out replaced by the one output directory; nothing else of the command
// changes, so each record is re-made exactly as it was first made.
//
// Not re-taken, and said so before anything runs:
//
//   - a transcription (marked "transcribed": reference.json, the reference
//     machine's figures, and machine-notes.json, the probes of the machine
//     notes), whose figures were copied from a document, not measured here;
//   - a record kept as "before": its command writes a record of another
//     name (idle-before.json's command says -name idle), so it is an earlier
//     edition of that record, kept on purpose to show what a change did.
//     Re-running its command would only measure today's code a second time.
//
// Invariants: the tree is clean when -retake starts (every record of the
// edition names the one commit it measured), and -out lies outside the
// repository, so writing one record cannot make the tree dirty for the
// next. The first line printed is the estimate of the whole run.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"softgpu/tools/internal/benchrun"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/record"
	"softgpu/tools/internal/records"
)

// recordCommand is how every record's command starts.
const recordCommand = "go run ./tools/cmd/record"

// retakeItem is one record of the edition and the arguments that re-take it.
type retakeItem struct {
	name     string
	args     []string      // the record's command's arguments, -out replaced
	estimate time.Duration // from the record's own rows, passes and benchtime
}

// retakePlan reads every record in dir and sorts them into those to re-take
// (by name) and those kept as they are, with the reason for each.
func retakePlan(dir, out string) (items []retakeItem, kept []string, err error) {
	recs, err := records.LoadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(recs) == 0 {
		return nil, nil, fmt.Errorf("no records in %s", dir)
	}
	names := make([]string, 0, len(recs))
	for name := range recs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rec := recs[name]
		if rec.Transcribed || rec.Command == "" {
			kept = append(kept, fmt.Sprintf("%s: a transcription (%s), not a measurement of this tree", name, orText(rec.Source, "no command")))
			continue
		}
		words, err := splitCommand(rec.Command)
		if err != nil {
			return nil, nil, fmt.Errorf("%s.json: command %q: %w", name, rec.Command, err)
		}
		prefix := strings.Fields(recordCommand)
		if len(words) < len(prefix) || strings.Join(words[:len(prefix)], " ") != recordCommand {
			return nil, nil, fmt.Errorf("%s.json: command %q does not start with %q", name, rec.Command, recordCommand)
		}
		args := dropOut(words[len(prefix):])
		if target := flagValue(args, "name"); target != name {
			kept = append(kept, fmt.Sprintf("%s: kept as the \"before\" edition of %s (its command writes %s.json), not re-taken", name, target, target))
			continue
		}
		items = append(items, retakeItem{name: name, args: append(args, "-out", out), estimate: recordEstimate(rec)})
	}
	return items, kept, nil
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

// dropOut removes -out DIR (or -out=DIR) from args.
func dropOut(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "-")
		switch {
		case a == "-out" || a == "out":
			i++ // and its value
		case strings.HasPrefix(a, "out=") || strings.HasPrefix(a, "-out="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

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

// retake re-takes every record of the book into out (see the file comment).
func retake(ctx context.Context, c *cli.Command, root, out string, force bool) int {
	if out == "" {
		return c.Misuse("-retake needs -out DIR, a directory outside the repository to write the edition into")
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return c.Fail(err)
	}
	if rel, err := filepath.Rel(root, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return c.Misuse("-out %s is inside the repository: each record is taken from a clean tree, and writing one there would make the tree dirty for the next; write the edition outside it and copy it into book/records afterwards", out)
	}
	if err := records.ProbeDir(abs); err != nil {
		return c.Misuse("-out %s: %v", out, err)
	}
	if changes, known := record.Changes(ctx, root); known && len(changes) > 0 {
		c.Printf("the tree has uncommitted changes (%s): an edition is taken from a clean tree at one commit, so commit them first", summarise(changes, 4))
		return cli.ExitFailed
	}
	items, kept, err := retakePlan(filepath.Join(root, "book", "records"), abs)
	if err != nil {
		return c.Fail(err)
	}
	var total time.Duration
	for _, it := range items {
		total += it.estimate
	}
	commit := record.Head(ctx, root)
	c.Printf("re-taking %d %s at commit %s into %s: at least about %s in all (rows × passes × benchtime; builds, the benchmarks' own warm-up and any re-runs come on top, and each record gives its own estimate as it starts)",
		len(items), plural(len(items), "record", "records"), shortHash(commit), abs, benchrun.Approx(total))
	for _, k := range kept {
		c.Printf("not re-taken: %s", k)
	}
	left := total
	for i, it := range items {
		if force {
			it.args = append(it.args, "-force")
		}
		c.Printf("record %d of %d: %s, about %s (about %s left): %s", i+1, len(items), it.name, benchrun.Approx(it.estimate), benchrun.Approx(left), cli.CommandLine(recordCommand, it.args))
		if code := run(ctx, it.args, c.Stdout, c.Stderr); code != cli.ExitOK {
			c.Printf("record %s failed (exit %d): the edition is incomplete; %d of %d records are in %s", it.name, code, i, len(items), abs)
			return code
		}
		if head := record.Head(ctx, root); head != commit {
			c.Printf("HEAD moved from %s to %s while re-taking: an edition is one commit; start again", shortHash(commit), shortHash(head))
			return cli.ExitFailed
		}
		left -= it.estimate
	}
	c.Printf("edition complete: %d records at commit %s in %s; copy them into book/records and build the book with -edition", len(items), shortHash(commit), abs)
	return cli.ExitOK
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
