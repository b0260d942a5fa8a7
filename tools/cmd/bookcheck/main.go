// Command bookcheck checks the rendered book in a headless Chromium, as a
// reader would see it on a phone and on a desktop.
//
//	go run ./tools/cmd/book && go run ./tools/cmd/bookcheck
//
// It serves the built site (book/_site) on 127.0.0.1, drives Chromium
// through the Chrome DevTools Protocol (its own minimal WebSocket client,
// standard library only), and loads every page at each width (390 and 1280
// CSS px by default). A page fails when it:
//
//   - pans sideways: the document is wider than the window
//     (document.documentElement.scrollWidth > innerWidth);
//   - logs an error to the console, or throws;
//   - has a request that fails or answers 400 or more;
//   - draws chart text smaller than -min-text CSS px, or diagram text
//     smaller than 10 px, once the drawing is scaled to its column;
//   - at a phone's width (under 700 px), has a table that scrolls sideways
//     with its label column scrolling away, or taking over half its frame.
//
// The print pages (print.html and its volumes) are also laid out as print
// media at A4's printable width: a table wider than the page fails, named.
// Each chapter is printed to PDF alone and its sheets counted, and the page
// numbers are written into print.html's contents (print.go).
//
// On the first page it also checks, at each width, that the sidebar opens
// and closes from the keyboard (Space, then Enter, on its toggle), and that
// search finds, for every chapter, a word of that chapter (the word fewest
// other chapters use), both through the search function and by typing into
// the box, and that it matches words by their start only (no section is
// found for a word it holds only inside a longer word). A screenshot of every page at every width (and in the dark theme
// with -dark) is written to -out (default book/_site/_screenshots), with an
// index.html to look through them.
//
// Exit status: 0 when every page passes, 1 when any fails, 2 for misuse.
// Install the browser with: apt-get install -y chromium.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/stages"
)

const usage = `usage: go run ./tools/cmd/bookcheck [-site DIR] [-out DIR] [-widths 390,1280] [-dark] [-j N] [-pages REGEXP]

Loads every page of the built book (go run ./tools/cmd/book) in headless
Chromium at each width and fails on sideways panning, console errors,
failed requests and chart text too small to read; writes a screenshot of
every page at every width to -out.`

// outMarker marks a screenshot folder this tool may clear.
const outMarker = ".bookcheck"

// shotsDir is the default screenshot folder, inside the site.
const shotsDir = "_screenshots"

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// execGroup starts the browser in a process group that ends with ctx.
var execGroup = func(ctx context.Context, name string, args ...string) *exec.Cmd {
	return cli.ExecGroup(ctx, name, args...)
}

type config struct {
	site, out, chromium string
	widths              []int
	dark                bool
	tabs                int
	pages               *regexp.Regexp
	minText             float64
	shots               bool
	axe                 string // axe.min.js's source, "" for no axe run
	sample              int    // source pages checked, spread evenly; 0 for all
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := cli.NewCommand("bookcheck", usage, stdout, stderr)
	var (
		site     = cmd.Flags.String("site", "", "the built site (default: <root>/book/_site)")
		out      = cmd.Flags.String("out", "", "folder for the screenshots, replaced on every run (default: <site>/_screenshots, which the next book build clears)")
		chromium = cmd.Flags.String("chromium", "/usr/bin/chromium", "the Chromium executable")
		widths   = cmd.Flags.String("widths", "390,1280", "window widths in CSS px, comma-separated")
		dark     = cmd.Flags.Bool("dark", false, "also load and shoot every page in the dark theme")
		tabs     = cmd.Flags.Int("j", 2, "pages loaded at once (browser tabs)")
		pages    = cmd.Flags.String("pages", "", "check only the pages whose site path matches this regexp")
		minText  = cmd.Flags.Float64("min-text", 10.5, "smallest chart text, in CSS px as drawn")
		shots    = cmd.Flags.Bool("screenshots", true, "write screenshots")
		timeout  = cmd.Flags.Duration("timeout", 20*time.Minute, "give up after this long")
		axe      = cmd.Flags.String("axe", "", "axe-core's axe.min.js: run its WCAG 2 A and AA rules on every load (.ci/a11y-tools installs it)")
		sample   = cmd.Flags.Int("sample", 0, "check every page outside src/ and diff/ but only this many of the generated source pages under src/ (one template), spread evenly, and the smallest diff page; 0 checks them all")
	)
	rest, code, done := cmd.Parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return cmd.Misuse("unexpected argument %q", rest[0])
	}
	cfg := config{chromium: *chromium, dark: *dark, tabs: *tabs, minText: *minText, shots: *shots, sample: *sample}
	if cfg.sample < 0 {
		return cmd.Misuse("-sample %d: want 0 (every page) or more", cfg.sample)
	}
	if *axe != "" {
		src, err := loadAxe(*axe)
		if err != nil {
			return cmd.Misuse("%v", err)
		}
		cfg.axe = src
	}
	for _, w := range strings.Split(*widths, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 200 || n > 4000 {
			return cmd.Misuse("-widths %q: want widths in CSS px between 200 and 4000, like 390,1280", *widths)
		}
		cfg.widths = append(cfg.widths, n)
	}
	if cfg.tabs < 1 || cfg.tabs > 16 {
		return cmd.Misuse("-j %d: want 1 to 16", cfg.tabs)
	}
	if *timeout <= 0 {
		return cmd.Misuse("-timeout %v: want a positive duration, like 20m", *timeout)
	}
	if *pages != "" {
		re, err := regexp.Compile(*pages)
		if err != nil {
			return cmd.Misuse("-pages: %v", err)
		}
		cfg.pages = re
	}
	cfg.site, cfg.out = *site, *out
	if cfg.site == "" {
		root, err := stages.Root()
		if err != nil {
			return cmd.Misuse("%v (or give -site)", err)
		}
		cfg.site = filepath.Join(root, "book", "_site")
	}
	if cfg.out == "" {
		// Inside the site, which is ignored by git and replaced by every
		// build: screenshots never make the tree dirty, and never outlive
		// the site they show.
		cfg.out = filepath.Join(cfg.site, shotsDir)
	}
	if _, err := os.Stat(filepath.Join(cfg.site, "index.html")); err != nil {
		return cmd.Misuse("%s has no index.html: build the book first (go run ./tools/cmd/book)", cfg.site)
	}
	if cfg.shots {
		if err := probeOut(cfg.out); err != nil {
			return cmd.Misuse("-out %s: %v", cfg.out, err)
		}
	}

	stop := ctx // ends on a signal; the -timeout below is a failure, not a stop
	ctx, cancel := context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("bookcheck: gave up after %v (-timeout)", *timeout))
	defer cancel()
	start := time.Now()
	report, err := check(ctx, cfg, cmd)
	if err != nil {
		if stop.Err() != nil {
			return cli.ExitInterrupted
		}
		return cmd.Fail(err)
	}
	fmt.Fprint(stdout, report.String())
	cmd.Printf("%d page loads in %s; screenshots in %s", report.loads, time.Since(start).Round(time.Second), cfg.out)
	if report.failed() {
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// sitePages lists the site's HTML pages, slash paths in order.
func sitePages(site string, only *regexp.Regexp) ([]string, error) {
	var pages []string
	err := filepath.WalkDir(site, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		rel, _ := filepath.Rel(site, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, shotsDir+"/") {
			return nil // the last run's gallery, not a page of the book
		}
		if only == nil || only.MatchString(rel) {
			pages = append(pages, rel)
		}
		return nil
	})
	sort.Strings(pages)
	return pages, err
}

// samplePages keeps every page outside src/ and diff/, n of the pages
// under src/ (every one of them made by one template, source.go), spread
// evenly over the sorted list so that each stage and each kind of file is
// likely among them, and the smallest diff page (each made by diff.go's
// one template; the largest holds over 100,000 elements, minutes of axe on
// a busy machine). src/index.html is always kept. n == 0 keeps them all.
// size gives a page's size in bytes.
func samplePages(pages []string, n int, size func(string) int64) []string {
	var keep, src []string
	smallestDiff := ""
	for _, p := range pages {
		switch {
		case strings.HasPrefix(p, "diff/"):
			if smallestDiff == "" || size(p) < size(smallestDiff) {
				smallestDiff = p
			}
		case !strings.HasPrefix(p, "src/") || p == "src/index.html":
			keep = append(keep, p)
		default:
			src = append(src, p)
		}
	}
	if n == 0 {
		return pages
	}
	if smallestDiff != "" {
		keep = append(keep, smallestDiff)
	}
	if n >= len(src) {
		keep = append(keep, src...)
		sort.Strings(keep)
		return keep
	}
	for i := range n {
		keep = append(keep, src[i*len(src)/n])
	}
	sort.Strings(keep)
	return keep
}

// prepareOut empties the screenshot folder, refusing one this tool did not
// make, so that a mistyped -out cannot delete someone's files.
func prepareOut(dir string) error {
	switch cleared, err := cli.ClearDir(dir, outMarker); {
	case err != nil:
		return err
	case !cleared:
		return notOurs(dir)
	}
	return os.WriteFile(filepath.Join(dir, outMarker), []byte("screenshots by go run ./tools/cmd/bookcheck; cleared on every run\n"), 0o644)
}

// probeOut checks, before any page is loaded, that prepareOut could use
// dir.
func probeOut(dir string) error { return cli.ProbeOut(dir, outMarker, "bookcheck") }

func notOurs(dir string) error { return cli.NotOurs(dir, outMarker, "bookcheck") }

// serve serves dir on a free port of 127.0.0.1 until ctx ends.
func serve(ctx context.Context, dir string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return "http://" + ln.Addr().String() + "/", nil
}

// check runs every load and returns what was found.
func check(ctx context.Context, cfg config, cmd *cli.Command) (*report, error) {
	pages, err := sitePages(cfg.site, cfg.pages)
	if err != nil {
		return nil, err
	}
	allPages, err := sitePages(cfg.site, nil)
	if err != nil {
		return nil, err
	}
	pages = samplePages(pages, cfg.sample, func(p string) int64 {
		fi, err := os.Stat(filepath.Join(cfg.site, filepath.FromSlash(p)))
		if err != nil {
			return 0
		}
		return fi.Size()
	})
	if len(pages) == 0 {
		return nil, fmt.Errorf("no pages to check in %s", cfg.site)
	}
	if cfg.shots {
		if err := prepareOut(cfg.out); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, err := serve(ctx, cfg.site)
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "bookcheck-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(profile)
	logFile, err := os.CreateTemp("", "bookcheck-chromium-*.log")
	if err != nil {
		return nil, err
	}
	defer os.Remove(logFile.Name())
	defer logFile.Close()
	browserCtx, stopBrowser := context.WithCancel(ctx)
	wsURL, wait, err := startChromium(browserCtx, cfg.chromium, profile, logFile)
	if err != nil {
		stopBrowser()
		return nil, err
	}
	defer func() {
		stopBrowser()
		wait()
	}()
	ws, err := dialWS(wsURL)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	c := newCDP(ws)

	// One load per page and width: the dark theme is checked in the same
	// load, switched the way the theme button switches it (data-theme on
	// <html>), since nothing but colour depends on it.
	var jobs []job
	for _, p := range pages {
		for _, w := range cfg.widths {
			jobs = append(jobs, job{page: p, width: w, scheme: "light", url: base + p})
		}
	}
	themes := 1
	if cfg.dark {
		themes = 2
	}
	cmd.Printf("%d pages × %d widths = %d loads in %d tabs, each checked in %d themes", len(pages), len(cfg.widths), len(jobs), cfg.tabs, themes)

	perJob := make([][]pageResult, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for range cfg.tabs {
		session, events, err := c.attach(ctx)
		if err != nil {
			return nil, fmt.Errorf("opening a tab: %w", err)
		}
		t := &tab{c: c, session: session, events: events, cfg: cfg}
		if err := t.prepare(ctx); err != nil {
			return nil, fmt.Errorf("loading axe into a tab: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rs, err := t.visit(ctx, jobs[i])
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s at %d px: %w", jobs[i].page, jobs[i].width, err); cancel() })
					continue
				}
				perJob[i] = rs
			}
		}()
	}
	done := 0
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if done++; done%100 == 0 {
			cmd.Printf("%d of %d loads", done, len(jobs))
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	rep := &report{loads: len(jobs)}
	for _, rs := range perJob {
		rep.results = append(rep.results, rs...)
	}

	// The keyboard and search checks, on the first page, at each width.
	session, events, err := c.attach(ctx)
	if err != nil {
		return nil, err
	}
	t := &tab{c: c, session: session, events: events, cfg: cfg}
	first := "index.html"
	for _, w := range cfg.widths {
		found, err := t.interact(ctx, job{page: first, width: w, scheme: "light", url: base + first})
		if err != nil {
			return nil, fmt.Errorf("interaction checks at %d px: %w", w, err)
		}
		rep.interactions = append(rep.interactions, found...)
	}
	// Paper: the print pages' tables against the printed width, and the
	// contents numbered (print.go).
	if pp := printPages(pages); len(pp) > 0 {
		start := time.Now()
		pr, err := t.printCheck(ctx, base, pp)
		if err != nil {
			return nil, fmt.Errorf("print check: %w", err)
		}
		rep.interactions = append(rep.interactions, pr.problems...)
		// Numbers only from the whole book: a -pages run that leaves out a
		// volume would count its chapters wrong.
		if pp[0] == "print.html" && len(pp) == len(printPages(allPages)) {
			if err := pr.number(cfg.site, pp); err != nil {
				return nil, err
			}
		}
		cmd.Printf("printed %d pages for paper (A4) to PDF: %d sheets; numbered in print.html's contents unless -pages left a volume out (%s)", len(pp), pr.sheets, time.Since(start).Round(time.Second))
	}
	if cfg.shots {
		if err := writeGallery(cfg.out, rep.results); err != nil {
			return nil, err
		}
	}
	return rep, nil
}
