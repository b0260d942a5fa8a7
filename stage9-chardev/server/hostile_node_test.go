package server_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/server"
)

// Item 9 of the threat model: the node cannot be stolen. A stranger who
// creates the node's directory before the daemon does — in /tmp, where
// anyone may, or in a directory others may write — owns the place the
// daemon's clients will connect to: it can swap the socket for its own
// and read every client's calls. So the daemon refuses to serve in a
// directory, or on a path, another uid owns or could have made.

// asStranger runs a shell command as another uid, a process of its own;
// it skips the test when this one cannot (not root).
func asStranger(t *testing.T, script string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("running a process as another uid needs root")
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: strangerUID, Gid: strangerUID}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the stranger's %q: %v: %s", script, err, out)
	}
}

// sharedTmp makes a directory like /tmp: world-writable and sticky.
func sharedTmp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky))
	// The test's own directory above it (0700) must let the stranger
	// through, as / does.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	return dir
}

// refused asserts that a daemon on node is refused with ErrUnsafeNode,
// and that it bound nothing there.
func refused(t *testing.T, node, why string) {
	t.Helper()
	s, err := server.New(server.Config{Node: node, Device: deviceConfig(16 << 20), Log: quiet()})
	if err == nil {
		s.Close()
		t.Fatalf("a daemon served on %s, %s", node, why)
	}
	require.ErrorIs(t, err, server.ErrUnsafeNode, "a daemon on %s, %s", node, why)
}

func TestTheNodeDirectoryAStrangerMadeIsRefused(t *testing.T) {
	tmp := sharedTmp(t)
	dir := filepath.Join(tmp, "softgpu-0")
	asStranger(t, "mkdir -m 0777 "+dir)
	refused(t, filepath.Join(dir, "card0"), "in a directory the stranger made")
	// Even one the stranger made private looks like ours from inside; it
	// is not.
	dir2 := filepath.Join(tmp, "softgpu-1")
	asStranger(t, "mkdir -m 0755 "+dir2)
	refused(t, filepath.Join(dir2, "card0"), "in a directory the stranger owns")
}

func TestTheDefaultNodeAStrangerPrecreatedIsRefused(t *testing.T) {
	// The fallback node, /tmp/softgpu-UID/card0, with TMPDIR standing in
	// for /tmp and the real softgpud: it must exit non-zero, saying why,
	// and never serve in the stranger's directory.
	tmp := sharedTmp(t)
	dir := filepath.Join(tmp, "softgpu-0")
	asStranger(t, "mkdir -m 0777 "+dir)
	bin := softgpud(t, t.TempDir())
	cmd := exec.Command(bin, "-mem", "16777216")
	cmd.Env = append(withoutEnv("XDG_RUNTIME_DIR"), "TMPDIR="+tmp)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(patience):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("softgpud with its default node in a directory a stranger made is still serving after %v\n%s", patience, logs.String())
	}
	out := logs.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("softgpud with its default node in a directory a stranger made: %v; want a non-zero exit\n%s", err, out)
	}
	_, err = os.Lstat(filepath.Join(dir, "card0"))
	assert.ErrorIs(t, err, os.ErrNotExist, "softgpud left a node in the stranger's directory\n%s", out)
}

func TestANodeDirectoryOthersMayWriteIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(dir, 0o700))
	os.Chmod(dir, 0o777)
	refused(t, filepath.Join(dir, "card0"), "in a directory everyone may write")
	// Sticky, as /tmp is, keeps others from removing what is there, not
	// from putting a node there first.
	refused(t, filepath.Join(sharedTmp(t), "card0"), "straight in a /tmp-like directory")
}

func TestAPathThroughAStrangersDirectoryIsRefused(t *testing.T) {
	tmp := sharedTmp(t)
	outer := filepath.Join(tmp, "outer")
	asStranger(t, "mkdir -m 0777 "+outer)
	inner := filepath.Join(outer, "mine")
	require.NoError(t, os.Mkdir(inner, 0o700))
	refused(t, filepath.Join(inner, "card0"), "under a directory the stranger owns (it can rename ours away)")
	// A symlink the stranger planted, pointing at a directory of ours.
	link := filepath.Join(tmp, "link")
	asStranger(t, "ln -s "+t.TempDir()+" "+link)
	refused(t, filepath.Join(link, "card0"), "through the stranger's symlink")
}

func TestTheDaemonMakesItsDirectoryPrivate(t *testing.T) {
	tmp := sharedTmp(t)
	node := filepath.Join(tmp, "softgpu-0", "sub", "card0")
	s := serve(t, server.Config{Node: node})
	for _, d := range []string{filepath.Dir(filepath.Dir(node)), filepath.Dir(node)} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("the daemon made %s %v; want 0700", d, fi.Mode().Perm())
		}
	}
	dial(t, s)
}

func TestAFileAtTheNodeIsNotRemoved(t *testing.T) {
	node := filepath.Join(t.TempDir(), "card0")
	require.NoError(t, os.WriteFile(node, []byte("mine"), 0o600))
	refused(t, node, "over a regular file")
	if b, err := os.ReadFile(node); err != nil || string(b) != "mine" {
		t.Errorf("the file at the node after a refused daemon: %q, %v; want it untouched", b, err)
	}
}

// withoutEnv is this process's environment without the variable name.
func withoutEnv(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
