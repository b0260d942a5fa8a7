// Command book renders softgpu's book to a static site.
//
// Run from anywhere inside the repository:
//
//	go run ./tools/cmd/book                 build book/ into book/_site, print index.html's path
//	go run ./tools/cmd/book -serve :8000    build, then serve the site until interrupted
//
// The chapters are listed in book/SUMMARY.md (mdBook's format). Code, diffs
// and figures come from the repository when the book is built:
// {{#include STAGE/PATH:ANCHOR}}, {{#diff STAGE}}, {{#table}}, {{#chart}},
// {{#value}}, {{#ratio}}, {{#meta}}, {{#claim}} and {{#records-appendix}}
// over book/records/*.json, {{#diagram}} from book/diagrams and
// {{#timeline}} from book/traces; see package softgpu/tools/internal/book.
// The site also holds every stage's source files as pages with line
// anchors (src/), a search index, and print.html. Any error (a missing
// anchor, an unknown record, a claim the record contradicts, a broken
// internal link) is printed with its file and line and the command exits 1.
//
// go run ./tools/cmd/bookcheck then checks the built site in headless
// Chromium.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"softgpu/tools/internal/book"
	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/stages"
)

const usage = `usage: go run ./tools/cmd/book [-root DIR] [-book DIR] [-o DIR] [-title T] [-edition] [-serve ADDR]

Renders the book (book/, chapters listed in SUMMARY.md) to a static site in
book/_site and prints the path of its index page; fails, with every error's
file and line, on a missing anchor, a contradicted claim or a broken link,
or a page that uses a record taken before later changes to the code it
measured without printing those commits (the build prints them itself);
with -edition, on any such stale record at all.
With -serve it then serves the site until stopped (Ctrl-C, or kill).`

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// run is the command. Exit codes as every tool's: 0 built (or served until
// stopped by nothing), 1 the build failed, 2 misuse — a stray argument, a
// book directory with no SUMMARY.md, an address -serve cannot listen on —
// and 128+n when a signal stopped the server.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := cli.NewCommand("book", usage, stdout, stderr)
	var (
		rootFlag  = cmd.Flags.String("root", "", "repository root: {{#include}} and {{#diff}} paths are relative to it (default: the directory holding go.work, found by walking up)")
		bookFlag  = cmd.Flags.String("book", "", "book directory holding SUMMARY.md (default: <root>/book)")
		outFlag   = cmd.Flags.String("o", "", "output directory, replaced on every build (default: <book>/_site)")
		titleFlag = cmd.Flags.String("title", "softgpu", "book title, when SUMMARY.md's heading is just \"Summary\"")
		edition   = cmd.Flags.Bool("edition", false, "strict: fail on any record taken before a later change to the non-test code it measured (CI turns this on once the records are re-taken at one commit with go run ./tools/cmd/record -retake)")
		serve     = cmd.Flags.String("serve", "", "after building, serve the site on this address (e.g. :8000 or 127.0.0.1:8000) until stopped")
	)
	rest, code, done := cmd.Parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return cmd.Misuse("unexpected argument %q (book takes only flags)", rest[0])
	}

	root := *rootFlag
	if root == "" {
		r, err := stages.Root()
		if err != nil {
			return cmd.Fail(err)
		}
		root = r
	}
	bookDir := *bookFlag
	if bookDir == "" {
		bookDir = filepath.Join(root, "book")
	}
	if _, err := os.Stat(filepath.Join(bookDir, "SUMMARY.md")); err != nil {
		return cmd.Misuse("%s has no SUMMARY.md: -book (or -root) must name the book's directory", bookDir)
	}
	out := *outFlag
	if out == "" {
		out = filepath.Join(bookDir, "_site")
	}
	if err := book.ProbeOutDir(out); err != nil {
		return cmd.Misuse("-o %s: %v", out, err)
	}
	// Listen before building, so that a busy port or a bad address is
	// reported at once, not after the build.
	var ln net.Listener
	if *serve != "" {
		l, err := net.Listen("tcp", *serve)
		if err != nil {
			return cmd.Misuse("-serve %q: %v", *serve, err)
		}
		ln = l
		defer ln.Close()
	}

	index, err := book.Build(book.Config{
		Root:    root,
		BookDir: bookDir,
		OutDir:  out,
		Title:   *titleFlag,
		Differ:  &book.StagesDiffer{Root: root},
		Edition: *edition,
		Context: ctx,
	})
	if ctx.Err() != nil {
		cmd.Printf("interrupted")
		return cli.ExitInterrupted
	}
	if err != nil {
		// The book's errors name their file and line, one a line, and
		// the last (or only) one already says "book: ".
		msg := err.Error()
		if !strings.HasPrefix(msg, "book: ") {
			msg = "book: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return cli.ExitFailed
	}
	fmt.Fprintln(stdout, index)
	if ln == nil {
		return cli.ExitOK
	}
	return serveSite(ctx, cmd, ln, out)
}

// serveSite serves dir on ln until ctx ends — a signal, or, under `go run`,
// the go command's death (cli.Main) — and the port is free again when it
// returns.
func serveSite(ctx context.Context, cmd *cli.Command, ln net.Listener, dir string) int {
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			srv.Close()
		}
	}()
	cmd.Printf("serving %s on http://%s/ (Ctrl-C stops)", dir, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return cmd.Fail(err)
	}
	return cli.ExitInterrupted
}
