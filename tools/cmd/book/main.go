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
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"softgpu/tools/internal/book"
	"softgpu/tools/internal/stages"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("book", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		rootFlag  = flags.String("root", "", "repository root: {{#include}} and {{#diff}} paths are relative to it (default: the directory holding go.work, found by walking up)")
		bookFlag  = flags.String("book", "", "book directory holding SUMMARY.md (default: <root>/book)")
		outFlag   = flags.String("o", "", "output directory, replaced on every build (default: <book>/_site)")
		titleFlag = flags.String("title", "softgpu", "book title, when SUMMARY.md's heading is just \"Summary\"")
		serve     = flags.String("serve", "", "after building, serve the site on this address (e.g. :8000 or 127.0.0.1:8000) until interrupted")
	)
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./tools/cmd/book [-root DIR] [-book DIR] [-o DIR] [-serve ADDR]\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		flags.Usage()
		return fmt.Errorf("book: unexpected argument %q", flags.Arg(0))
	}

	root := *rootFlag
	if root == "" {
		r, err := stages.Root()
		if err != nil {
			return err
		}
		root = r
	}
	bookDir := *bookFlag
	if bookDir == "" {
		bookDir = filepath.Join(root, "book")
	}
	out := *outFlag
	if out == "" {
		out = filepath.Join(bookDir, "_site")
	}

	index, err := book.Build(book.Config{
		Root:    root,
		BookDir: bookDir,
		OutDir:  out,
		Title:   *titleFlag,
		Differ:  &book.StagesDiffer{Root: root},
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, index)
	if *serve == "" {
		return nil
	}
	return serveSite(*serve, out, stderr)
}

// serveSite serves dir on addr until SIGINT or SIGTERM.
func serveSite(addr, dir string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(stderr, "serving %s on http://%s/ (Ctrl-C stops)\n", dir, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
