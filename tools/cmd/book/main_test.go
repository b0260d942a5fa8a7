package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/cli"
)

var fixture = filepath.Join("..", "..", "internal", "book", "testdata", "repo")

func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "site")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-o", out}, &stdout, &stderr)
	require.Equal(t, cli.ExitOK, code, "run = exit %d; want 0\n%s", code, stderr.String())
	index := filepath.Join(out, "index.html")
	if got := strings.TrimSpace(stdout.String()); got != index {
		t.Errorf("run printed %q; want the index path %q", got, index)
	}
	_, err := os.Stat(index)
	assert.NoError(t, err, "no index.html")
}

// TestRunUsage checks -h and every misuse: -h prints the usage on stdout
// and exits 0; misuse exits 2 with one line on stderr naming the bad input,
// prefixed once, before anything is built.
func TestRunUsage(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // in full; for -h, "" and the usage on stdout
	}{
		{"help", []string{"-h"}, cli.ExitOK, ""},
		{"help after a flag", []string{"-o", "x", "-help"}, cli.ExitOK, ""},
		{"bad flag", []string{"-bogus"}, cli.ExitUsage, "book: flag provided but not defined: -bogus\n"},
		{"stray argument", []string{"-root", fixture, "extra"}, cli.ExitUsage, `book: unexpected argument "extra" (book takes only flags)` + "\n"},
		{"no SUMMARY.md", []string{"-root", fixture, "-book", empty}, cli.ExitUsage,
			"book: " + empty + " has no SUMMARY.md: -book (or -root) must name the book's directory\n"},
		{"bad address", []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-serve", "a:b:c"}, cli.ExitUsage,
			`book: -serve "a:b:c": listen tcp: address a:b:c: too many colons in address` + "\n"},
		{"busy port", []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-serve", busy.Addr().String()}, cli.ExitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "site")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(tt.args, "-o", out), &stdout, &stderr)
			require.Equal(t, tt.wantCode, code, "run(%q) = exit %d\nstderr: %s", tt.args, code, stderr.String())
			switch {
			case tt.wantCode == cli.ExitOK:
				if !strings.HasPrefix(stdout.String(), "usage: go run ./tools/cmd/book") || !strings.Contains(stdout.String(), "-serve") || stderr.Len() > 0 {
					t.Errorf("run(%q): stdout %q, stderr %q; want the usage and flags on stdout only", tt.args, stdout.String(), stderr.String())
				}
			case tt.wantStderr != "":
				assert.Equal(t, tt.wantStderr, stderr.String(), "run(%q) stderr", tt.args)
			default:
				if !strings.HasPrefix(stderr.String(), "book: -serve ") || strings.Count(stderr.String(), "\n") != 1 {
					t.Errorf("run(%q) stderr = %q; want one line about -serve", tt.args, stderr.String())
				}
			}
			if tt.wantCode == cli.ExitUsage {
				_, err := os.Stat(out)
				assert.Error(t, err, "run(%q) built the site; misuse must stop before building", tt.args)
			}
		})
	}
}

func TestRunBuildFails(t *testing.T) {
	// A chapter including an anchor that does not exist fails the build,
	// with exit 1 and the error's file and line, "book: " once.
	dir := t.TempDir()
	bookDir := filepath.Join(dir, "book")
	require.NoError(t, os.MkdirAll(bookDir, 0o755))
	write := func(name, data string) {
		require.NoError(t, os.WriteFile(filepath.Join(bookDir, name), []byte(data), 0o644))
	}
	write("SUMMARY.md", "# Summary\n\n- [One](one.md)\n")
	write("one.md", "# One\n\n{{#include nosuch/file.go:anchor}}\n")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-root", dir, "-o", filepath.Join(dir, "site")}, &stdout, &stderr)
	if code != cli.ExitFailed || !strings.Contains(stderr.String(), "one.md") || strings.Contains(stderr.String(), "book: book:") {
		t.Errorf("run with a broken include = exit %d, %q; want exit 1 naming one.md, prefixed once", code, stderr.String())
	}
}

// TestServeStops checks that -serve stops when its context ends — as it
// does on a signal, or when the go command of `go run` dies — and frees
// its port.
func TestServeStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-o", filepath.Join(t.TempDir(), "site"), "-serve", addr}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the site was never served on %s: %s", addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, cli.ExitInterrupted, code, "run -serve stopped with exit %d", code)
	case <-time.After(10 * time.Second):
		t.Fatal("run -serve did not stop within 10s of its context ending")
	}
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err, "port still busy after -serve stopped")
	ln.Close()
}

// TestRunInterrupted checks a build whose context has ended (a signal)
// stops with the interrupted exit code and writes nothing.
func TestRunInterrupted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "site")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-o", out}, &stdout, &stderr)
	if code != cli.ExitInterrupted {
		t.Errorf("run(cancelled) = exit %d, stderr %q; want %d", code, stderr.String(), cli.ExitInterrupted)
	}
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "an interrupted build wrote %s (%v)", out, err)
}

// TestRunUsageOutput checks an output path the build could not use — a
// file, or a directory of someone else's files — is refused as misuse
// before anything is built.
func TestRunUsageOutput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious.txt"), []byte("x"), 0o644))
	tests := []struct {
		name, out, wantStderr string
	}{
		{"a file", file, "book: -o " + file + ": " + file + " is not a directory\n"},
		{"someone else's directory", foreign, "book: -o " + foreign + ": " + foreign + " is not empty and was not written by the book tool (no .softgpu-book); refusing to replace it\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-o", tt.out}
			code := run(context.Background(), args, &stdout, &stderr)
			if code != cli.ExitUsage || stderr.String() != tt.wantStderr {
				t.Errorf("run(%q) = exit %d, stderr %q; want exit 2 and %q", args, code, stderr.String(), tt.wantStderr)
			}
		})
	}
	_, err := os.Stat(filepath.Join(foreign, "index.html"))
	assert.True(t, os.IsNotExist(err), "book wrote into a foreign directory")
}
