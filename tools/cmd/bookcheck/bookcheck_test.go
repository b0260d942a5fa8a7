package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/book"
	"softgpu/tools/internal/cli"
)

// wsServer accepts one WebSocket connection and hands it to serve, which
// speaks raw frames.
func wsServer(t *testing.T, serve func(r *bufio.Reader, w net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + wsGUID))
		io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
			base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n")
		serve(r, conn)
	}()
	return "ws://" + ln.Addr().String() + "/devtools/browser/x"
}

// serverFrame is an unmasked frame, as a server sends.
func serverFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	f := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		f = append(f, byte(n))
	case n <= 0xffff:
		f = append(f, 126, byte(n>>8), byte(n))
	default:
		f = append(f, 127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	return append(f, payload...)
}

// readClientFrame reads one masked frame from the client.
func readClientFrame(t *testing.T, r *bufio.Reader) (byte, []byte) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Errorf("reading a frame: %v", err)
		return 0, nil
	}
	if h[1]&0x80 == 0 {
		t.Errorf("a client frame is not masked")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		io.ReadFull(r, ext[:])
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		io.ReadFull(r, ext[:])
		n = binary.BigEndian.Uint64(ext[:])
	}
	var mask [4]byte
	io.ReadFull(r, mask[:])
	p := make([]byte, n)
	io.ReadFull(r, p)
	for i := range p {
		p[i] ^= mask[i%4]
	}
	return h[0] & 0x0f, p
}

func TestWebSocket(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 70000) // a 64-bit length
	got := make(chan []byte, 4)
	url := wsServer(t, func(r *bufio.Reader, w net.Conn) {
		// Echo the client's message, then a fragmented one with a ping in
		// the middle, then a big one, then close.
		op, p := readClientFrame(t, r)
		assert.Equal(t, byte(opText), op, "client sent opcode %#x", op)
		got <- p
		w.Write(serverFrame(true, opText, p))
		w.Write(serverFrame(false, opText, []byte("frag")))
		w.Write(serverFrame(true, opPing, []byte("are you there")))
		w.Write(serverFrame(true, opContinuation, []byte("mented")))
		if op, p := readClientFrame(t, r); op != opPong || string(p) != "are you there" {
			t.Errorf("answer to a ping: opcode %#x %q; want a pong with its payload", op, p)
		}
		w.Write(serverFrame(true, opBinary, big))
		w.Write(serverFrame(true, opClose, nil))
	})
	ws, err := dialWS(url)
	require.NoError(t, err, "dialWS")
	defer ws.Close()
	msg := bytes.Repeat([]byte(`{"id":1}`), 40) // a 16-bit length
	require.NoError(t, ws.WriteText(msg))
	if p := <-got; !bytes.Equal(p, msg) {
		t.Errorf("server received %q; want %q", p, msg)
	}
	for _, want := range [][]byte{msg, []byte("fragmented"), big} {
		p, err := ws.ReadMessage()
		require.NoError(t, err, "ReadMessage")
		assert.Equal(t, want, p, "ReadMessage = %d bytes %.20q; want %d bytes %.20q", len(p), p, len(want), want)
	}
	if _, err := ws.ReadMessage(); err != io.EOF {
		t.Errorf("after a close frame: %v; want io.EOF", err)
	}
}

func TestShotName(t *testing.T) {
	tests := []struct {
		j    job
		want string
	}{
		{job{page: "index.html", width: 390, scheme: "light"}, "index-390.png"},
		{job{page: "src/stage0-mailbox/device/engine.go.html", width: 1280, scheme: "dark"}, "src__stage0-mailbox__device__engine.go-1280-dark.png"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.j.shotName(), "shotName(%v)", tt.j)
	}
}

func TestPrepareOutRefusesForeignFolders(t *testing.T) {
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious.png"), []byte("x"), 0o644))
	if err := prepareOut(foreign); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("prepareOut(foreign) = %v; want a refusal", err)
	}
	own := filepath.Join(t.TempDir(), "shots")
	require.NoError(t, prepareOut(own))
	require.NoError(t, os.WriteFile(filepath.Join(own, "old.png"), []byte("x"), 0o644))
	require.NoError(t, prepareOut(own), "prepareOut(own folder)")
	if _, err := os.Stat(filepath.Join(own, "old.png")); !os.IsNotExist(err) {
		t.Errorf("prepareOut left an old screenshot")
	}
}

func TestUsage(t *testing.T) {
	site := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("<p>hi</p>"), 0o644))
	file := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious.png"), []byte("x"), 0o644))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-site", site, "-out", file}, "-out " + file + ": " + file + " is not a directory"},
		{[]string{"-site", site, "-out", foreign}, "-out " + foreign + ": " + foreign + " is not empty and was not written by bookcheck (no .bookcheck); refusing to replace it"},
		{[]string{"-widths", "wide"}, "-widths \"wide\": want widths in CSS px"},
		{[]string{"-j", "0"}, "-j 0: want 1 to 16"},
		{[]string{"-timeout", "0"}, "-timeout 0s: want a positive duration"},
		{[]string{"-timeout", "-1m"}, "-timeout -1m0s: want a positive duration"},
		{[]string{"-site", t.TempDir(), "-out", t.TempDir()}, "has no index.html: build the book first"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tt.args, &stdout, &stderr)
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("run(%q) = %d, %q; want exit 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

// TestStartChromiumHint checks the hint to install Chromium is given when
// the browser is missing, and only then.
func TestStartChromiumHint(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		exe      string
		wantHint bool
	}{
		{"not on PATH", context.Background(), "no-such-chromium", true},
		{"no such file", context.Background(), filepath.Join(t.TempDir(), "chromium"), true},
		{"cancelled", cancelled, "/bin/sh", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := startChromium(tt.ctx, tt.exe, t.TempDir(), nil)
			if err == nil || strings.Contains(err.Error(), "apt-get install") != tt.wantHint {
				t.Errorf("startChromium(%s) = %v; want an error, with the install hint %v", tt.exe, err, tt.wantHint)
			}
		})
	}
}

// TestRunInterrupted checks a run stopped by a signal (its context ended
// with a *cli.SignalError cause) exits as interrupted, not as failed.
func TestRunInterrupted(t *testing.T) {
	site := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(site, "index.html"), []byte("<p>hi</p>"), 0o644))
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&cli.SignalError{Signal: syscall.SIGINT})
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"-site", site, "-screenshots=false"}, &stdout, &stderr); code != cli.ExitInterrupted {
		t.Errorf("run(stopped by SIGINT) = exit %d, stderr %q; want %d", code, stderr.String(), cli.ExitInterrupted)
	}
}

// TestInChromium builds the fixture book, spoils one page the ways a page
// can fail, and checks that a real headless Chromium finds each failure and
// passes the rest.
func TestInChromium(t *testing.T) {
	exe := os.Getenv("CHROMIUM")
	if exe == "" {
		exe = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(exe); err != nil || testing.Short() {
		t.Skipf("no %s (apt-get install -y chromium), or -short", exe)
	}
	fixture, err := filepath.Abs(filepath.Join("..", "..", "internal", "book", "testdata", "repo"))
	require.NoError(t, err)
	site := filepath.Join(t.TempDir(), "site")
	_, err = book.Build(book.Config{Root: fixture, BookDir: filepath.Join(fixture, "book"), OutDir: site, Title: "fixture", Differ: &book.StagesDiffer{Root: fixture}})
	require.NoError(t, err, "building the fixture book")
	spoiled := `<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"></head><body>
<h1>Spoiled</h1><h3>A level down too far</h3>
<div style="width: 900px">too wide</div><img src="nosuch.png"><script>console.error("spoiled"); undefinedFunction();</script></body></html>`
	require.NoError(t, os.WriteFile(filepath.Join(site, "spoiled.html"), []byte(spoiled), 0o644))

	out := filepath.Join(t.TempDir(), "shots")
	var stdout, stderr bytes.Buffer
	// Generous: axe-core on a busy 2-core machine takes minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := []string{"-site", site, "-out", out, "-chromium", exe, "-widths", "390,1280", "-dark",
		"-pages", `^(index|stage0|stage1|records|print|spoiled|diff/stage1-ring|src/stage0-mailbox/device/engine\.go)\.html$`}
	// AXE=path/to/axe.min.js (.ci/a11y-tools prints it) runs axe-core too.
	axe := os.Getenv("AXE")
	if axe != "" {
		args = append(args, "-axe", axe)
	}
	code := run(ctx, args, &stdout, &stderr)
	report := stdout.String()
	require.Equal(t, cli.ExitFailed, code, "run; want 1 for the spoiled page\nstdout:\n%s\nstderr:\n%s", report, stderr.String())
	for _, want := range []string{
		"FAIL spoiled.html at 390 px\n",
		"pans sideways: the page is 9", // 900 px and the body's margin
		`console error: spoiled`,
		"uncaught exception: Uncaught ReferenceError: undefinedFunction is not defined",
		"nosuch.png: HTTP 404",
		"FAIL spoiled.html at 1280 px, dark\n",
		`heading h3 "A level down too far" is h3 after h1: a level is skipped`,
		`image nosuch.png has the text alternative "", which does not say what it shows`,
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s\nstderr:\n%s", want, report, stderr.String())
		}
	}
	if axe != "" && !strings.Contains(report, "axe image-alt (critical)") {
		t.Errorf("with -axe, report lacks axe's image-alt on the spoiled page:\n%s", report)
	}
	// Paper: the contents of print.html are numbered, the first chapter
	// after the cover and the contents.
	printed, err := os.ReadFile(filepath.Join(site, "print.html"))
	require.NoError(t, err)
	if !regexp.MustCompile(`<span class="toc-page" data-print-id="intro">[1-9][0-9]*</span>`).Match(printed) {
		t.Errorf("print.html's contents give no page for the introduction:\n%s", regexp.MustCompile(`<span class="toc-page"[^>]*>[^<]*</span>`).FindAll(printed, -1))
	}
	// Every page of the book passes: only the spoiled page fails.
	if failed := regexp.MustCompile(`(?m)^FAIL (\S+)`).FindAllStringSubmatch(report, -1); len(failed) != 4 {
		t.Errorf("failures %v; want the spoiled page at 2 widths × 2 themes only:\n%s", failed, report)
	} else {
		for _, f := range failed {
			assert.Equal(t, "spoiled.html", f[1], "%s failed:\n%s", f[1], report)
		}
	}
	for _, name := range []string{"index-390.png", "stage1-1280-dark.png", "src__stage0-mailbox__device__engine.go-390.png", "index.html"} {
		_, err := os.Stat(filepath.Join(out, name))
		assert.NoError(t, err, "no %s in the screenshot folder", name)
	}
}

func TestSamplePages(t *testing.T) {
	pages := []string{"diff/stage1-ring.html", "diff/stage2-fence.html", "index.html", "print.html",
		"src/a.go.html", "src/b.go.html", "src/c.go.html", "src/d.go.html", "src/index.html", "stage0.html"}
	size := func(p string) int64 {
		if p == "diff/stage2-fence.html" {
			return 10
		}
		return 100
	}
	got := strings.Join(samplePages(pages, 2, size), " ")
	want := "diff/stage2-fence.html index.html print.html src/a.go.html src/c.go.html src/index.html stage0.html"
	assert.Equal(t, want, got, "samplePages(2)")
	if got := samplePages(pages, 0, size); len(got) != len(pages) {
		t.Errorf("samplePages(0) kept %d of %d pages; want all", len(got), len(pages))
	}
}
