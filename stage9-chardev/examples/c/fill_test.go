// Package c_test builds the C client fill.c with the system's C compiler
// and runs it against a daemon in this process: the proof that
// include/softgpu_uapi.h is enough to drive the device from C.
package c_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
