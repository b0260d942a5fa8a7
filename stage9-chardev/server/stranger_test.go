package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The stranger's harness: the real softgpud, built from this stage and
// run as a process of its own; attackers that are processes of their own
// too (this test binary re-executed in a stranger role, speaking the uapi
// through package client or by hand), as root or as another uid; and a
// well-behaved client in the test's process whose round trips say the
// daemon stayed alive (live, within liveBound, during and after an
// attack). Every test that uses it ends by stopping the daemon with
// SIGTERM and requiring it to exit 0 within stopBound (stop). Every
// hostile test (hostile_*_test.go) starts its daemon here.
//
// A stranger role is registered in strangerRoles by an init beside the
// test that starts it, and played by TestMain (process_test.go), which
// runs once every init has: an init here could not see the roles of
// files whose names sort after this one.

// strangerArgEnv carries a stranger role's argument.
const strangerArgEnv = "SOFTGPU_TEST_STRANGER_ARG"

// strangerRoles are the roles a re-executed test binary may play against
// the node in nodeEnv, each with the argument in strangerArgEnv. A role
// prints what it found on stdout, one line per finding, and "done" last.
var strangerRoles = map[string]func(node, arg string) error{}

// The one way a hostile test starts softgpud, probes it and stops it.

// softgpudEnv names a softgpud binary the hostile tests run instead of
// building this stage's: an older build, to see a test fail on the code
// before its fix (e.g. `git archive e8261a4 stage9-chardev | tar -x -C
// /tmp/old`, then `GOWORK=off go build -o /tmp/old/softgpud ./cmd/softgpud`
// in /tmp/old/stage9-chardev). A test whose flags the old daemon does not
// know fails at startDaemon, saying which.
const softgpudEnv = "SOFTGPUD_BIN"

// liveBound is the round trip a well-behaved client must stay within
// while a stranger attacks and after: a client's whole life on the daemon
// (dial, register a page, a 4 KiB FILL and its fence, close) takes a few
// milliseconds, and a loaded 2-core machine under -race stays far below
// a second; two seconds is a wedge, not a slow machine.
const liveBound = 2 * time.Second

// stopBound is how long softgpud may take to exit after SIGTERM, in
// every state: its own shutdownBound (cmd/softgpud), 10 s. A clean stop
// takes milliseconds; one that needs the whole bound exits 1, which
// stop also fails.
const stopBound = 10 * time.Second

// daemon is a softgpud process.
type daemon struct {
	cmd    *exec.Cmd
	node   string
	exited chan error
	logsMu sync.Mutex
	logs   bytes.Buffer
}

func (d *daemon) Write(p []byte) (int, error) {
	d.logsMu.Lock()
	defer d.logsMu.Unlock()
	return d.logs.Write(p)
}

// log returns what the daemon has written so far.
func (d *daemon) log() string {
	d.logsMu.Lock()
	defer d.logsMu.Unlock()
	return d.logs.String()
}

// dropped returns the lines of a daemon's log that say it dropped a
// client.
func dropped(log string) string {
	var lines []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "client dropped") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}

// droppedTime returns when the daemon's log first says it dropped a
// client (its time= field), the zero time if it never did.
func droppedTime(log string) time.Time {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "client dropped") || !strings.HasPrefix(line, "time=") {
			continue
		}
		field, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		if at, err := time.Parse(time.RFC3339Nano, field); err == nil {
			return at
		}
	}
	return time.Time{}
}

// softgpud returns the daemon binary: the one softgpudEnv names, or
// this stage's, built into dir; it skips the test when there is no go
// command.
func softgpud(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(softgpudEnv); bin != "" {
		return bin
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build softgpud with")
	}
	bin := filepath.Join(dir, "softgpud")
	if out, err := exec.Command(gobin, "build", "-o", bin, "softgpu/stage9-chardev/cmd/softgpud").CombinedOutput(); err != nil {
		t.Fatalf("go build softgpud: %v\n%s", err, out)
	}
	return bin
}

// startDaemon runs softgpud, as a process of its own, with args on a
// node in a directory any uid may enter (mode 0666 on the node, so a
// stranger of another uid can connect; args may say otherwise), and
// waits until it answers. It is killed when the test ends if it is still
// running; a test ends by stopping it (stop).
func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	dir := strangerDir(t)
	bin, node := softgpud(t, dir), filepath.Join(dir, "node", "card0")
	require.NoError(t, os.Mkdir(filepath.Dir(node), 0o755))
	d := &daemon{node: node, exited: make(chan error, 1)}
	d.cmd = exec.Command(bin, append([]string{"-node", node, "-mode", "0666", "-mem", "16777216"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d, d
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
			t.Fatalf("softgpud %q exited before it answered: %v\n%s", args, err, d.log())
		default:
		}
		ctl, err := client.DialControl(node)
		if err != nil {
			return false, err.Error()
		}
		ctl.Close()
		return true, ""
	})
	return d
}

// strangerDir makes a directory every uid may read and enter, removed at
// the test's end: the daemon's binary, the node's directory and a copy of
// this test binary that a stranger of another uid can run live there.
// (t.TempDir is 0700 under a 0700 parent.)
func strangerDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "softgpu-stranger-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// live is the liveness probe: a new well-behaved client's whole life on
// the daemon — dial, a round trip (roundTrip), close — within liveBound.
func (d *daemon) live(t *testing.T, when string) {
	t.Helper()
	start := time.Now()
	w := dialWellBehaved(t, d.node)
	w.roundTrip(t, when, 0x5a)
	assert.NoError(t, w.g.Close(), "%s: the well-behaved client's Close", when)
	if took := time.Since(start); took > liveBound {
		t.Errorf("%s: a well-behaved client's life on the daemon took %v; want under %v", when, took, liveBound)
	}
}

// stop sends SIGTERM and requires the daemon to exit 0 within stopBound,
// measured here; it returns how long the exit took.
func (d *daemon) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-d.exited:
		d.exited <- err
		took := time.Since(start)
		require.NoError(t, err, "softgpud %v after SIGTERM; want exit status 0\n%s", took, d.log())
		return took
	case <-time.After(stopBound):
		t.Fatalf("softgpud still running %v after SIGTERM\n%s", stopBound, d.log())
	}
	return 0
}

// wellBehaved is a client in the test's process whose round trips show
// the daemon is alive.
type wellBehaved struct {
	g    *client.GPU
	host *client.HostBuffer
}

// dialWellBehaved connects the well-behaved client.
func dialWellBehaved(t testing.TB, node string) *wellBehaved {
	t.Helper()
	g, err := client.Dial(node)
	require.NoError(t, err, "the well-behaved client's Dial")
	t.Cleanup(func() { g.Close() })
	h, err := g.HostAlloc(4096)
	require.NoError(t, err, "the well-behaved client's HostAlloc")
	return &wellBehaved{g: g, host: h}
}

// roundTrip fills the client's host page with v and checks every byte,
// failing the test if that takes longer than liveBound.
func (w *wellBehaved) roundTrip(t testing.TB, when string, v byte) {
	t.Helper()
	start := time.Now()
	require.NoError(t, w.g.Fill(w.host.Ptr(), 4096, v), "%s: the well-behaved client's Fill", when)
	if took := time.Since(start); took > liveBound {
		t.Errorf("%s: the well-behaved client's round trip took %v; want under %v", when, took, liveBound)
	}
	for i, b := range w.host.Bytes() {
		require.Equal(t, v, b, "%s: the well-behaved client's byte %d reads %#x", when, i, b)
	}
}

// stranger is a re-executed test binary in a stranger role.
type stranger struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // a line here is the test's signal to a role that waits for one
	lines  chan string
	stderr bytes.Buffer
	done   chan error
}

// strangerUID is the uid and gid a stranger runs as to be "not root":
// nobody.
const strangerUID = 65534

// strangerCred is who a stranger runs as: nobody when the test runs as
// root (whom the daemon always trusts), else the test's own user, which
// no daemon flag names unless the test says so.
func strangerCred() (*syscall.Credential, uint32) {
	if os.Getuid() == 0 {
		return &syscall.Credential{Uid: strangerUID, Gid: strangerUID}, strangerUID
	}
	return nil, uint32(os.Getuid())
}

// startStranger starts the test binary as role against node, with arg,
// as the user cred names (nil: this process's). A stranger of another uid
// runs a copy of the test binary from a directory it may enter.
func startStranger(t *testing.T, role, node, arg string, cred *syscall.Credential) *stranger {
	t.Helper()
	bin := os.Args[0]
	if cred != nil {
		bin = filepath.Join(strangerDir(t), "stranger.test")
		require.NoError(t, copyFile(bin, os.Args[0]))
	}
	s := &stranger{cmd: exec.Command(bin, "-test.run=^$"), lines: make(chan string, 64), done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), roleEnv+"="+role, nodeEnv+"="+node, strangerArgEnv+"="+arg)
	s.cmd.Stderr = &s.stderr
	if cred != nil {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		s.cmd.Dir = filepath.Dir(bin)
	}
	out, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	require.NoError(t, s.cmd.Start(), "starting a %s process", role)
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	return s
}

// findings collects the stranger's lines until "done" and its exit 0.
func (s *stranger) findings(t *testing.T) []string {
	t.Helper()
	got := s.until(t, "done")
	require.NoError(t, s.cmd.Wait(), "stranger %d: %s", s.cmd.Process.Pid, s.stderr.String())
	return got
}

// until collects the stranger's lines until last, for a stranger that
// goes on holding what it took once it has said so; the test's end kills
// it.
func (s *stranger) until(t *testing.T, last string) []string {
	t.Helper()
	var got []string
	timeout := time.After(patience)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				require.NoError(t, s.cmd.Wait(), "stranger %d: %s", s.cmd.Process.Pid, s.stderr.String())
				err := s.cmd.Wait()
				t.Fatalf("stranger %d ended (%v) without %q; it said %q: %s", s.cmd.Process.Pid, err, last, got, s.stderr.String())
			}
			if line == last {
				return got
			}
			got = append(got, line)
		case <-timeout:
			t.Fatalf("stranger %d said %q and not %q within %v", s.cmd.Process.Pid, got, last, patience)
		}
	}
}

// kill ends the stranger and returns what it wrote to stderr: read only
// once it has exited, as the buffer is written until then.
func (s *stranger) kill() string {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	return s.stderr.String()
}

// stdinLines is a stranger's standard input, where the test writes a
// line as its signal (stranger.stdin); waitLine waits for the next one.
var stdinLines = bufio.NewScanner(os.Stdin)

func waitLine() error {
	if !stdinLines.Scan() {
		return fmt.Errorf("stdin closed before the test's signal: %v", stdinLines.Err())
	}
	return nil
}

// copyFile copies an executable from src to dst, mode 0755.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// errnoLine is how a stranger reports a call's outcome: "NAME ok", or
// "NAME errno=N" with the uapi errno the daemon answered, or "NAME
// error: ..." for a failure that carries none.
func errnoLine(name string, err error) string {
	var e uapi.Errno
	switch {
	case err == nil:
		return name + " ok"
	case errors.As(err, &e):
		return fmt.Sprintf("%s errno=%d", name, uint32(e))
	}
	return fmt.Sprintf("%s error: %v", name, err)
}
