// Package c_test builds the C client fill.c with the system's C compiler
// and runs it against a daemon in this process: the proof that
// include/softgpu_uapi.h is enough to drive the device from C — and that
// a stranger in C (fill -hang, fill -garbage; fill's own check of the
// read-only pages reopened through /proc/self/fd) harms no other client.
package c_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/internal/leakcheck"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
)

// serve starts a daemon in this process for the rest of the test.
var serve = servetest.Serve

// build compiles fill.c as the README says, or skips the test without a
// C compiler.
func build(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: cc is not on PATH, so fill.c cannot be built")
	}
	include, err := filepath.Abs(filepath.Join("..", "..", "include"))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "fill")
	cmd := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I"+include, "-o", bin, "fill.c")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return bin
}

// runFill runs the client on node and returns its exit status and output.
// The client gives up on the device after 10 s; 30 s bounds a client that
// hangs before it gets that far.
func runFill(t testing.TB, bin, node string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, node)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		code = exit.ExitCode()
	default:
		t.Fatalf("running %s %s: %v\nstderr:\n%s", bin, node, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

func TestFill(t *testing.T) {
	bin := build(t)

	t.Run("daemon running", func(t *testing.T) {
		leakcheck.Check(t)
		s := serve(t, server.Config{})
		code, stdout, stderr := runFill(t, bin, s.Node())
		if want := "ok: 4096 bytes filled by the device\n"; code != 0 || stdout != want {
			t.Errorf("fill %s = exit %d, stdout %q; want exit 0, %q\nstderr:\n%s", s.Node(), code, stdout, want, stderr)
		}
	})

	t.Run("no daemon", func(t *testing.T) {
		node := filepath.Join(t.TempDir(), "card0")
		code, stdout, stderr := runFill(t, bin, node)
		want := "fill: no daemon at " + node + ": is softgpud running?"
		if code != 1 || !strings.HasPrefix(stderr, want) || stdout != "" {
			t.Errorf("fill %s = exit %d, stdout %q, stderr %q; want exit 1 and a stderr starting %q", node, code, stdout, stderr, want)
		}
	})
}

// liveBound is the longest a victim's round trip (a 4 KiB FILL of its
// host page and its fence) may take while the stranger attacks: it takes
// well under a millisecond; two seconds is a wedge, not a slow machine.
const liveBound = 2 * time.Second

// TestAStrangerInC runs fill as a stranger beside a victim in this
// process: a DELAY of 2^62 cycles (softgpud's default watchdog, 2 s,
// must stop it), garbage in its ring and doorbell page, and a
// CHANNEL_START before it has touched its channel's pages, then holes
// punched in a started channel's memfds (both refused). Each must end
// as fill says — its channel faulted, or the refusals — the victim's bytes right and its
// round trips within liveBound before, during and after, and the daemon
// closing cleanly (serve's cleanup). The read-only pages reopened
// O_RDWR through /proc/self/fd are fill's own check, in every mode.
func TestAStrangerInC(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct{ mode, says string }{{"-hang", "hanging"}, {"-garbage", "garbage"}, {"-unpopulated", "unpopulated"}} {
		t.Run(tc.mode, func(t *testing.T) {
			s := serve(t, server.Config{Driver: driver.Config{Watchdog: uint64(2 * time.Second)}}) // softgpud's default
			victim, err := client.Dial(s.Node())
			require.NoError(t, err)
			defer victim.Close()
			h, err := victim.HostAlloc(4096)
			require.NoError(t, err)
			trips := 0
			roundTrip := func(when string) {
				t.Helper()
				trips++
				v := byte(trips)
				start := time.Now()
				require.NoError(t, victim.Fill(h.Ptr(), 4096, v), "%s: the victim's Fill", when)
				if took := time.Since(start); took > liveBound {
					t.Errorf("%s: the victim's round trip took %v; want under %v", when, took, liveBound)
				}
				for i, b := range h.Bytes() {
					require.Equal(t, v, b, "%s: the victim's byte %d reads %#x", when, i, b)
				}
			}
			roundTrip("before the stranger")

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.mode, s.Node())
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			lines := bufio.NewScanner(out)
			if !lines.Scan() || lines.Text() != tc.says {
				cmd.Wait()
				t.Fatalf("fill %s said %q, not %q\nstderr:\n%s", tc.mode, lines.Text(), tc.says, errOut.String())
			}
			rest := make(chan string, 1)
			go func() {
				var b strings.Builder
				for lines.Scan() {
					b.WriteString(lines.Text() + "\n")
				}
				rest <- b.String()
			}()
			var said string
			for ended := false; !ended; {
				select {
				case said = <-rest: // its stdout closed: it has exited
					ended = true
				default:
					roundTrip("while the stranger attacks")
				}
			}
			err = cmd.Wait()
			if err != nil || !strings.HasPrefix(said, "ok: the daemon") {
				t.Errorf("fill %s: %v, stdout %q; want exit 0 and the daemon's fault or refusal\nstderr:\n%s", tc.mode, err, said, errOut.String())
			}
			t.Logf("fill %s: %s(%d round trips of the victim meanwhile)", tc.mode, said, trips-1)
			roundTrip("after the stranger")
		})
	}
}
