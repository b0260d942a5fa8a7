package server

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
)

// memfdWith returns a memfd of pages pages, page k filled with byte k+1.
func memfdWith(t *testing.T, pages int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("punch-test", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	page := unix.Getpagesize()
	for k := range pages {
		_, err := unix.Pwrite(fd, bytes.Repeat([]byte{byte(k + 1)}, page), int64(k*page))
		require.NoError(t, err)
	}
	return fd
}

// pageOf reads page k of fd.
func pageOf(t *testing.T, fd, k int) []byte {
	t.Helper()
	b := make([]byte, unix.Getpagesize())
	_, err := unix.Pread(fd, b, int64(k*len(b)))
	require.NoError(t, err)
	return b
}

// processEnded reports whether pid has ended: gone, or a zombie nobody
// has reaped yet.
func processEnded(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// waitEnded fails t unless pid ends within 5 s.
func waitEnded(t *testing.T, pid int, what string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !processEnded(pid); {
		if time.Now().After(end) {
			t.Fatalf("%s (pid %d) is still running 5s later", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAPunchHelperPunchesAndSaysWhy: a helper punches exactly the range
// asked, out of the memfd it is sent, and answers the kernel's errno for
// a request the kernel refuses — and goes on serving after it, the same
// process, which the puncher keeps for the next request.
func TestAPunchHelperPunchesAndSaysWhy(t *testing.T) {
	var pu puncher
	defer pu.close()
	memfd := memfdWith(t, 3)
	page := unix.Getpagesize()
	h, err := pu.take()
	require.NoError(t, err)
	require.NoError(t, h.punch(memfd, int64(page), int64(page), time.Second))
	assert.Equal(t, make([]byte, page), pageOf(t, memfd, 1), "page 1, punched: zeros")
	assert.Equal(t, bytes.Repeat([]byte{1}, page), pageOf(t, memfd, 0), "page 0, not asked")
	assert.Equal(t, bytes.Repeat([]byte{3}, page), pageOf(t, memfd, 2), "page 2, not asked")
	began, ended := h.span()
	assert.False(t, began.IsZero(), "the clock's start after a punch: the helper marks when it began")
	assert.False(t, ended.Before(began), "the clock's end after a punch: the helper marks when it ended, after it began")

	err = h.punch(memfd, -1, int64(page), time.Second)
	assert.ErrorIs(t, err, syscall.EINVAL, "a punch at offset -1")
	assert.NotErrorIs(t, err, errHelperLost, "a refusal of the kernel's is the helper's answer, not a lost helper")

	pid := h.cmd.Process.Pid
	pu.give(h)
	again, err := pu.take()
	require.NoError(t, err)
	assert.Equal(t, pid, again.cmd.Process.Pid, "the helper taken after one was given back: the same process")
	require.NoError(t, again.punch(memfd, 0, int64(page), time.Second))
	assert.Equal(t, make([]byte, page), pageOf(t, memfd, 0), "page 0, punched by the same helper after its refusal")
	pu.give(again)

	pu.close()
	waitEnded(t, pid, "the helper waiting for work when the puncher closed")
	_, err = pu.take()
	assert.ErrorIs(t, err, errPuncherClosed, "a helper asked of a closed puncher")
}

// holdInodeLock holds memfd's inode lock until release is called: a
// thread write()s into memfd from a page registered, missing mode, with a
// kernel-mode userfaultfd of this process, and sleeps in the write's
// fault-in with the lock held until release fills the page. It needs the
// right to make a kernel-mode userfaultfd (root here).
func holdInodeLock(t *testing.T, memfd int) (release func()) {
	t.Helper()
	u, err := uffd.Open(0, 0)
	require.NoError(t, err)
	page := unix.Getpagesize()
	buf, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	require.NoError(t, uffd.Register(u, uffd.Address(buf), uint64(page), uffd.ModeMissing))
	wrote := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // it never runs Go code while it waits: the thread is in write(2)
		_, err := unix.Pwrite(memfd, buf, 0)
		wrote <- err
	}()
	// The write is asleep in its fault-in once the fault is queued.
	pfd := []unix.PollFd{{Fd: int32(u), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 5000)
	for errors.Is(err, syscall.EINTR) { // the runtime's signals: try again
		n, err = unix.Poll(pfd, 5000)
	}
	require.NoError(t, err)
	require.Equal(t, 1, n, "the write's fault did not come within 5s")
	return func() {
		_, err := uffd.Copy(u, uffd.Address(buf), make([]byte, page))
		assert.NoError(t, err, "filling the page the write waits for")
		assert.NoError(t, <-wrote, "the write that held the lock")
		unix.Close(u)
		unix.Munmap(buf)
	}
}

// TestAStuckPunchHelperIsLetGoAndTheNextPunchStartsAnother: a helper whose
// fallocate waits on a lock the memfd's owner holds for good is not
// waited for past its patience, counted from when it began; it is let go,
// and a punch after it starts a helper of its own, which serves. The
// one let go ends once the lock is released — it cannot before, SIGKILL
// or not, which is why it is a process of its own and not a thread of
// the daemon's.
func TestAStuckPunchHelperIsLetGoAndTheNextPunchStartsAnother(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a kernel-mode userfaultfd needs root here (vm.unprivileged_userfaultfd=0)")
	}
	var pu puncher
	defer pu.close()
	held, free := memfdWith(t, 2), memfdWith(t, 2)
	release := holdInodeLock(t, held)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	page := int64(unix.Getpagesize())

	stuck, err := pu.take()
	require.NoError(t, err)
	start := time.Now()
	err = stuck.punch(held, 0, page, 200*time.Millisecond)
	require.ErrorIs(t, err, errHelperLost, "a punch of a memfd whose inode lock is held")
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "the punch gave up before its patience")
	began, ended := stuck.span()
	assert.False(t, began.IsZero(), "the stuck helper's clock: it began its fallocate")
	assert.True(t, ended.IsZero(), "the stuck helper's clock: it has not ended its fallocate")
	pu.lose(stuck)
	stuckPid := stuck.cmd.Process.Pid
	time.Sleep(50 * time.Millisecond)
	assert.False(t, processEnded(stuckPid), "the let-go helper ended while the lock it waits on was held")

	next, err := pu.take()
	require.NoError(t, err)
	assert.NotEqual(t, stuckPid, next.cmd.Process.Pid, "the punch after a lost helper: a new process")
	require.NoError(t, next.punch(free, page, page, time.Second))
	assert.Equal(t, make([]byte, page), pageOf(t, free, 1), "page 1 of another memfd, punched by the new helper")
	pu.give(next)

	release()
	released = true
	waitEnded(t, stuckPid, "the let-go helper, its lock released")
}

// TestAPunchHelperStartedByHandSaysSo: the helper role is for the
// daemon's own processes; a binary started with the variable set by
// hand, without the descriptors the daemon passes, exits with a clear
// message rather than doing anything.
func TestAPunchHelperStartedByHandSaysSo(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), punchHelperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the binary run as a helper by hand: %v", err)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, stderr.String(), "is for the daemon's own helper process")
}

// TestAPuncherThatCannotStartAHelperSaysWhy: where no helper can be
// started (no exec allowed, a binary gone), ready — which MANAGED_PAGER
// calls, and refuses with ErrPerm on its error, so that the client goes
// on without a pager — fails, naming what failed, and leaves no helper.
func TestAPuncherThatCannotStartAHelperSaysWhy(t *testing.T) {
	var pu puncher
	pu.exe = filepath.Join(t.TempDir(), "gone")
	err := pu.ready()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting a punch helper")
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Nil(t, pu.idle, "a helper kept after it failed to start")
}

// TestATakenHelpersClockIsClear: a request that takes a helper finds its
// clock cleared, before bounded ever looks at it. Cleared only when the
// request was sent, a caller held up on its way there (100 ms without a
// core) read the previous request's start as its own, judged the call
// stuck before it was made, and dropped a well-behaved client.
func TestATakenHelpersClockIsClear(t *testing.T) {
	var pu puncher
	defer pu.close()
	memfd := memfdWith(t, 1)
	h, err := pu.take()
	require.NoError(t, err)
	require.NoError(t, h.punch(memfd, 0, int64(unix.Getpagesize()), time.Second))
	began, _ := h.span()
	require.False(t, began.IsZero(), "the clock after a punch")
	pu.give(h)
	again, err := pu.take()
	require.NoError(t, err)
	require.Same(t, h, again, "the helper given back")
	began, ended := again.span()
	assert.True(t, began.IsZero() && ended.IsZero(), "the clock of a helper just taken: %v, %v; want zero, zero", began, ended)
	pu.give(again)
}

// TestClosingThePuncherCutsOffAPunchInFlight: Close closes the puncher
// first, and a punch waiting for its helper — one that has not begun, for
// want of a core (a stopped helper stands in for it) — fails at once,
// rather than hold um.mu, which Close needs to tear the clients down,
// for as long as punchStartBound.
func TestClosingThePuncherCutsOffAPunchInFlight(t *testing.T) {
	var pu puncher
	memfd := memfdWith(t, 1)
	h, err := pu.take()
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(h.cmd.Process.Pid, syscall.SIGSTOP))
	done := make(chan error, 1)
	go func() { done <- h.punch(memfd, 0, int64(unix.Getpagesize()), time.Second) }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	pu.close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, errHelperLost, "the punch cut off")
		assert.Less(t, time.Since(start), punchStartBound/2, "how long the punch took to fail after close")
	case <-time.After(punchStartBound + time.Second):
		t.Fatalf("the punch was still waiting %v after close", punchStartBound+time.Second)
	}
	pu.lose(h)
	waitEnded(t, h.cmd.Process.Pid, "the stopped helper, let go") // SIGKILL ends a stopped process
}

// TestAPunchThatEndedInTimeIsNotStuck: a call made in another process
// that ended within the bound is waited for, however long its answer
// takes to come back: the hand-off back is the daemon's load. Here the
// helper began and ended at once, and the answer took two bounds to
// reach the caller.
func TestAPunchThatEndedInTimeIsNotStuck(t *testing.T) {
	drops := 0
	p := &pager{drop: func(string) { drops++ }}
	asked := time.Now()
	span := func() (time.Time, time.Time) { return asked, asked.Add(time.Millisecond) }
	err := p.bounded(pagerCall{op: "a quick call, slow to answer, of", page: 0, pages: 1, span: span}, func(int, int) error {
		time.Sleep(pagerBound * 2)
		return nil
	})
	assert.NoError(t, err, "the call, which ended a millisecond after it began")
	assert.Zero(t, drops, "clients dropped")
}

// TestTheBoundCountsFromTheHelpersStart: for a call made in another
// process, bounded counts pagerBound from when that process began it
// (pagerCall.span), not from when the daemon asked: a helper that waits
// for a core — another uid's load — is not the client holding its lock.
// Here the helper takes 1.5 bounds to begin and finishes half a bound
// later; counted from the request, the call would outlive the bound and
// the client be dropped.
func TestTheBoundCountsFromTheHelpersStart(t *testing.T) {
	drops := 0
	p := &pager{drop: func(string) { drops++ }}
	asked := time.Now()
	startsAt := asked.Add(pagerBound * 3 / 2)
	began := func() time.Time {
		if time.Now().Before(startsAt) {
			return time.Time{}
		}
		return startsAt
	}
	span := func() (time.Time, time.Time) { return began(), time.Time{} }
	err := p.bounded(pagerCall{op: "a slow helper's call of", page: 0, pages: 1, span: span}, func(int, int) error {
		time.Sleep(pagerBound * 2)
		return nil
	})
	assert.NoError(t, err, "the call, which ran half a bound from its start")
	assert.Zero(t, drops, "clients dropped")
}

// handHelper is a punch helper played by the test on the far end of a
// socket pair, sharing h's clock page: serve is given each request's
// clock and answers when it returns.
func handHelper(t *testing.T, serve func(clock *punchClock)) *punchHelperProc {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	go func() {
		var req [punchRequestSize]byte
		oob := make([]byte, unix.CmsgSpace(4))
		for {
			n, oobn, _, _, err := unix.Recvmsg(fds[1], req[:], oob, unix.MSG_CMSG_CLOEXEC)
			if err != nil || n == 0 {
				return
			}
			if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cmsgs) == 1 {
				if got, err := unix.ParseUnixRights(&cmsgs[0]); err == nil {
					for _, fd := range got {
						unix.Close(fd)
					}
				}
			}
			serve(clockOf(page))
			unix.Write(fds[1], make([]byte, 4)) // errno 0
		}
	}()
	return &punchHelperProc{sock: fds[0], page: page}
}

// TestAPunchThatEndedInTimeIsWaitedFor: punch itself, like bounded
// (TestAPunchThatEndedInTimeIsNotStuck), waits for the answer of a
// fallocate that ended in time, however late the answer: the hand-off
// back is the daemon's load, and giving up lets a good helper go, starts
// another under um.mu, and leaves the run on the host. Here the helper's
// fallocate took a millisecond, and its answer came 1.5 patiences after
// it began. Counted from the start alone, punch gave up at patience.
func TestAPunchThatEndedInTimeIsWaitedFor(t *testing.T) {
	const patience = 100 * time.Millisecond
	h := handHelper(t, func(c *punchClock) {
		now := monotonicNow()
		c.began.Store(now)
		c.ended.Store(now + int64(time.Millisecond))
		time.Sleep(patience * 3 / 2)
	})
	memfd := memfdWith(t, 1)
	assert.NoError(t, h.punch(memfd, 0, int64(unix.Getpagesize()), patience), "a punch that ended a millisecond after it began")
}

// TestAHelperHoldsOnlyItsOwnDescriptors: a helper may outlive the
// daemon, stuck on a client's lock, so it must hold nothing of the
// daemon's. Go opens every descriptor close-on-exec, but the kernel
// installs some in the daemon without it: the userfaultfd a client's
// fork event carries, if the client made its own without O_CLOEXEC,
// which the pager closes only after its read — a helper started in
// between inherited it. Here the daemon holds a pipe opened without
// close-on-exec when a helper starts; the helper must not hold it.
func TestAHelperHoldsOnlyItsOwnDescriptors(t *testing.T) {
	var fds [2]int
	require.NoError(t, unix.Pipe2(fds[:], 0)) // no O_CLOEXEC
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var pu puncher
	defer pu.close()
	h, err := pu.take()
	require.NoError(t, err)
	memfd := memfdWith(t, 1)
	require.NoError(t, h.punch(memfd, 0, int64(unix.Getpagesize()), time.Second), "a punch: the helper is past its start")
	pipe, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fds[0]))
	require.NoError(t, err)
	dir := fmt.Sprintf("/proc/%d/fd", h.cmd.Process.Pid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var held []string
	for _, e := range entries {
		if link, _ := os.Readlink(dir + "/" + e.Name()); link == pipe {
			held = append(held, e.Name())
		}
	}
	assert.Empty(t, held, "the helper's descriptors that are the daemon's %s", pipe)
	pu.give(h)
}
