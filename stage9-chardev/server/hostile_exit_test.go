package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Item 8 of the threat model, its last clause: softgpud exits non-zero
// whenever serving stops for a reason other than a signal, saying why on
// stderr — whoever started it must hear that it no longer serves.
//
// What stops Serve is an accept error that is neither a timeout nor a
// shortage of resources (those are waited out: conns.go). This test
// makes one from outside, as any process of the daemon's uid with
// ptrace rights could: it takes a duplicate of the daemon's listening
// socket (pidfd_getfd) and shuts it down, so the daemon's next accept
// fails with EINVAL.

// listenerFD returns the number of pid's descriptor for the Unix socket
// listening at node, found through /proc/net/unix (its inode) and
// /proc/PID/fd.
func listenerFD(t *testing.T, pid int, node string) int {
	t.Helper()
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		t.Skipf("no /proc/net/unix: %v", err)
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// Accepted connections show the node's path too; the listener
		// is the one whose flags say __SO_ACCEPTCON.
		if len(fields) == 8 && fields[7] == node && fields[3] == "00010000" {
			inode = fields[6]
		}
	}
	if inode == "" {
		t.Fatalf("no socket listening at %s in /proc/net/unix", node)
	}
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fds)
	require.NoError(t, err)
	for _, e := range entries {
		if link, _ := os.Readlink(filepath.Join(fds, e.Name())); link == "socket:["+inode+"]" {
			var fd int
			fmt.Sscan(e.Name(), &fd)
			return fd
		}
	}
	t.Fatalf("softgpud (pid %d) holds no descriptor for socket inode %s", pid, inode)
	return -1
}

// exitsNonZero asserts softgpud exits within stopBound of start with a
// non-zero status, saying on stderr that serving stopped and why.
func (d *daemon) exitsNonZero(t *testing.T, why, because string) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-d.exited:
		d.exited <- err
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("softgpud, %s: %v; want a non-zero exit status\n%s", why, err, d.log())
		}
		if log := d.log(); !strings.Contains(log, "serving stopped") || !strings.Contains(log, because) {
			t.Errorf("softgpud's stderr, %s, does not say serving stopped because %q:\n%s", why, because, log)
		}
		t.Logf("softgpud exited %v after %s: %v", time.Since(start), why, err)
	case <-time.After(stopBound):
		t.Fatalf("softgpud still running %v after %s: it serves no one and says nothing\n%s", stopBound, why, d.log())
	}
}

func TestServingThatStopsWithoutASignalExitsNonZero(t *testing.T) {
	t.Run("listener shut down", func(t *testing.T) {
		d := startDaemon(t)
		d.live(t, "before")
		pidfd, err := unix.PidfdOpen(d.cmd.Process.Pid, 0)
		if err != nil {
			t.Skipf("pidfd_open: %v", err)
		}
		defer unix.Close(pidfd)
		ln, err := unix.PidfdGetfd(pidfd, listenerFD(t, d.cmd.Process.Pid, d.node), 0)
		if err != nil {
			t.Skipf("pidfd_getfd on softgpud's listener: %v", err)
		}
		defer unix.Close(ln)
		require.NoError(t, unix.Shutdown(ln, unix.SHUT_RDWR), "shutting down softgpud's listener")
		d.exitsNonZero(t, "its listener shut down under it", "was shut down")
		_, err = os.Lstat(d.node)
		assert.ErrorIs(t, err, os.ErrNotExist, "softgpud left its node behind")
	})
	t.Run("node removed", func(t *testing.T) {
		d := startDaemon(t)
		d.live(t, "before")
		require.NoError(t, os.Remove(d.node))
		d.exitsNonZero(t, "its node removed", "was removed")
	})
	t.Run("node replaced", func(t *testing.T) {
		d := startDaemon(t)
		d.live(t, "before")
		require.NoError(t, os.Remove(d.node))
		require.NoError(t, os.WriteFile(d.node, []byte("not softgpud's\n"), 0o600))
		d.exitsNonZero(t, "its node replaced", "was replaced")
		if b, err := os.ReadFile(d.node); err != nil || string(b) != "not softgpud's\n" {
			t.Errorf("what replaced softgpud's node, after softgpud exited: %q, %v; want it untouched", b, err)
		}
	})
}
