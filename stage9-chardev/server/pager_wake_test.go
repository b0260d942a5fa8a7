package server_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
)

// What a paged client can do to the daemon by not playing its part
// (pager.go, "Isolation"). The client reads nothing the daemon sends: the
// daemon never writes the liveness socket, and its answer to a fault —
// the wake — is an ioctl that returns whether or not the faulting thread
// ever runs again. The one thing of the daemon's the client holds is the
// userfaultfd's open file description, and with it the O_NONBLOCK flag
// the daemon's poll and read of the descriptor obey.

func init() {
	strangerRoles["pager-blocking-uffd"] = pagerBlockingUffd
}

// pagerBlockingUffd is a stranger role: it makes paged managed memory,
// makes its userfaultfd blocking — for the daemon's copy too, one open
// file description — and then goes on as a paged client does: the device
// writes the memory, the host reads it back, lap after lap. It prints
// "blocking" once the flag is cleared and "laps done" if it comes through
// its laps.
func pagerBlockingUffd(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(64 << 10)
	if err != nil {
		return err
	}
	defer m.Free()
	if !m.Paged() {
		fmt.Println("not paged")
		return nil
	}
	fd, err := ownUserfaultfd()
	if err != nil {
		return err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil { // O_NONBLOCK off
		return fmt.Errorf("clearing O_NONBLOCK: %w", err)
	}
	fmt.Println("blocking")
	host := m.Bytes()
	for lap := range 4 {
		if err := g.Fill(m.Ptr(), 64<<10, byte(lap+1)); err != nil {
			return err
		}
		for i := 0; i < len(host); i += 4096 {
			if host[i] != byte(lap+1) {
				return fmt.Errorf("lap %d: the host reads %#x at %d", lap, host[i], i)
			}
		}
	}
	fmt.Println("laps done")
	return nil
}

// ownUserfaultfd finds this process's userfaultfd: a paged client with one
// allocation has one.
func ownUserfaultfd() (int, error) {
	links, err := filepath.Glob("/proc/self/fd/*")
	if err != nil {
		return -1, err
	}
	for _, l := range links {
		if target, _ := os.Readlink(l); target == "anon_inode:[userfaultfd]" {
			var fd int
			if _, err := fmt.Sscan(filepath.Base(l), &fd); err == nil {
				return fd, nil
			}
		}
	}
	return -1, errors.New("no userfaultfd among this process's descriptors")
}

// TestPagerDropsAClientWhoseFaultsItCannotRead: a client that makes its
// userfaultfd blocking has made it one the daemon can no longer wait on
// (the kernel's poll of a userfaultfd without O_NONBLOCK reports an
// error). The daemon drops it — closes its connection and frees its
// memory — and the client is killed with SIGKILL by its liveness socket,
// or sees its next call fail, instead of waiting for ever in a fault
// nobody will read. The daemon serves a well-behaved client after — its
// one fault loop, which served the dropped client too, answers a paged
// client's faults — and stops on SIGTERM in time. Before the drop, the
// pager ended silently on the poll's error and the client's next fault
// waited for ever.
func TestPagerDropsAClientWhoseFaultsItCannotRead(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	ctl := control(t, d.node)
	before := info(t, ctl).MemoryUsed
	s := startStranger(t, "pager-blocking-uffd", d.node, "", nil)
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	var said []string
	var err error
	deadline := time.After(patience)
wait:
	for {
		select {
		case line, ok := <-s.lines:
			if ok {
				said = append(said, line)
				continue
			}
			s.lines = nil
		case err = <-exited:
			break wait
		case <-deadline:
			s.cmd.Process.Kill()
			<-exited // so that the cleanup's Wait is the second, not a concurrent one
			t.Fatalf("the stranger still runs %v after making its userfaultfd blocking (it said %q): waiting in a fault nobody reads", patience, said)
		}
	}
	if len(said) > 0 && said[0] == "not paged" {
		t.Skip("the daemon does not page (userfaultfd not permitted here?)")
	}
	// Dropped, the stranger either is killed (it waited in a fault, or
	// the daemon's end of its liveness socket closed before it noticed) or
	// has a call fail and exits 1 — never a hang, never a wrong byte. The
	// call fails on the closed connection, or, when the drop removed the
	// stranger's channels while its FILL was still queued, with that FILL
	// completing as removed: which of the two the stranger sees first is
	// a race between the daemon's teardown and its own next call, and both
	// are the drop. (.ci/durations saw the second at 328a77e.)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the stranger exited with %v (it said %q); want dropped\n%s", err, said, s.stderr.String())
	ws := ee.Sys().(syscall.WaitStatus)
	killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL
	failed := strings.Contains(s.stderr.String(), "the daemon closed the connection") ||
		strings.Contains(s.stderr.String(), abi.StatusRemoved.String())
	refused := ws.Exited() && ws.ExitStatus() == 1 && failed
	if !killed && !refused {
		t.Errorf("the stranger ended with %v (it said %q); want killed by SIGKILL, or a call failing on its closed connection or its removed channel\n%s", ee, said, s.stderr.String())
	}
	assert.Equal(t, []string{"blocking"}, said, "the stranger's lines")
	waitClients(t, ctl, 1) // ctl alone: the stranger was dropped
	waitFor(t, "the stranger's device memory freed", func() (bool, string) {
		used := info(t, ctl).MemoryUsed
		return used == before, fmt.Sprintf("%d bytes used; %d before the stranger", used, before)
	})
	d.live(t, "after a client made its userfaultfd blocking")
	startChild(t, "pager", d.node, 0, 1).succeed(t) // host reads after device writes, and the rest: faults answered
	d.stop(t)
}
