package server_test

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
)

// Helpers of the hostile-daemon tests (hostile_*_test.go): the real
// softgpud built for a test, and a daemon log nobody reads.

// quiet is a logger that discards.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// buildDaemon builds softgpud into the test's temporary directory and
// returns its path; it skips the test when there is no go command.
func buildDaemon(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build softgpud with")
	}
	bin := filepath.Join(t.TempDir(), "softgpud")
	if out, err := exec.Command(gobin, "build", "-o", bin, "softgpu/stage9-chardev/cmd/softgpud").CombinedOutput(); err != nil {
		t.Fatalf("go build softgpud: %v\n%s", err, out)
	}
	return bin
}

// daemonProc is softgpud running as a process of its own: the daemon a
// hostile test attacks from this process, across the boundary.
type daemonProc struct {
	cmd    *exec.Cmd
	node   string
	logs   *os.File
	exited chan error
}

// startDaemon builds softgpud, starts it on a node in a fresh directory
// with args, and waits until it answers. It is killed when the test ends
// if it is still running.
func startDaemon(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	bin := buildDaemon(t)
	dir := t.TempDir()
	d := &daemonProc{node: filepath.Join(dir, "card0"), exited: make(chan error, 1)}
	var err error
	if d.logs, err = os.Create(filepath.Join(dir, "log")); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, append([]string{"-node", d.node, "-mem", "16777216"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	require.NoError(t, d.cmd.Start())
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		err := <-d.exited
		d.exited <- err
	})
	waitFor(t, "softgpud answering on its node", func() (bool, string) {
		select {
		case err := <-d.exited:
			d.exited <- err
			t.Fatalf("softgpud exited before serving: %v\n%s", err, d.log())
		default:
		}
		ctl, err := client.DialControl(d.node)
		if err != nil {
			return false, err.Error()
		}
		ctl.Close()
		return true, ""
	})
	return d
}

// log returns what the daemon has logged so far.
func (d *daemonProc) log() string {
	b, _ := os.ReadFile(d.logs.Name())
	return string(b)
}

// roundTrip is a well-behaved client's whole life on the daemon: dial,
// write a pattern, read it back, close. It returns how long that took,
// or fails the test.
func roundTrip(t *testing.T, node string) time.Duration {
	t.Helper()
	start := time.Now()
	g, err := client.Dial(node)
	require.NoError(t, err, "a well-behaved client's Dial")
	defer g.Close()
	const size = 64 << 10
	p, err := g.Alloc(size)
	require.NoError(t, err, "a well-behaved client's Alloc")
	want := pattern(0x5a, size)
	require.NoError(t, g.Write(p, want), "a well-behaved client's Write")
	got := make([]byte, size)
	require.NoError(t, g.Read(got, p), "a well-behaved client's Read")
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("a well-behaved client's byte %d reads %#x; want %#x", i, got[i], want[i])
	}
	return time.Since(start)
}

// liveBound is how long a well-behaved client's round trip may take
// while a stranger attacks: generous (it takes milliseconds), so that
// only a wedged daemon fails it.
const liveBound = 5 * time.Second

// stillServes asserts a well-behaved client's round trip completes
// within liveBound.
func (d *daemonProc) stillServes(t *testing.T, when string) {
	t.Helper()
	if took := roundTrip(t, d.node); took > liveBound {
		t.Errorf("%s: a well-behaved client's round trip took %v; want under %v", when, took, liveBound)
	}
}

// terminate sends SIGTERM and asserts the daemon exits 0 within bound.
func (d *daemonProc) terminate(t *testing.T, bound time.Duration) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-d.exited:
		d.exited <- err
		assert.NoError(t, err, "softgpud after SIGTERM; want exit status 0\n%s", d.log())
	case <-time.After(bound):
		t.Errorf("softgpud still running %v after SIGTERM\n%s", bound, d.log())
	}
}
