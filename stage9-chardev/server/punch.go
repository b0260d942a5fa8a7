package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The punch helper: the one call into a client's memory that the daemon
// does not make in its own process.
//
// Remove punches pages out of the client's memfd with fallocate, which
// takes the memfd's inode lock, and waits for it uninterruptibly. A
// client allowed kernel-mode userfaultfds can hold that lock for good: a
// thread of its own write()s into the memfd from a buffer registered
// with a second userfaultfd it never answers, and the write sleeps in its
// fault-in with the lock held. bounded gives up on such a call and drops
// the client, but the call itself goes on waiting, on a thread; and a
// process ends only when its last thread does. A daemon thread asleep
// there would keep softgpud alive past SIGTERM, and past SIGKILL, until
// the client let go (TestAStrangerHoldingItsMemfdLockCannotWedgeSIGTERM).
// So the daemon does not make that call: a helper process does — this
// same binary, started again in a role of its own (punchHelperEnv) — and
// the daemon waits for its answer on a socket, for as long as it chooses.
// A helper stuck on a client's lock is let go, sent SIGKILL (which it
// takes when the lock frees) and left to end alone; the next punch starts
// another. No thread of the daemon's sleeps on a client's lock for good.
//
// The userfaultfd ioctls stay in the daemon. They take the client's mmap
// lock, which the kernel is careful not to hold while it waits on user
// space: handle_userfault lets the lock go (the mmap lock, or the VMA's)
// before it sleeps, and fails a fault that may not let it go rather than
// wait. The red team found a client holding its mmap lock only as long
// as one system call of its own takes (TestAStrangersMmapLockStallsNoOtherClient),
// which bounded deals with. Moving the ioctls too would cost every fault
// the host takes a round trip between processes (one
// Baseline/op=uffdfault/path=process, the floor under ManagedPager's
// sparse touch).
//
// The price: a punch is a round trip to another process, where it was a
// system call — one per run of pages a device fault moves (moveRun, in
// the driver), not one per page. A helper that has just served is awake
// and answers in tens of microseconds; one asleep since its last punch
// pays two wake-ups between processes, its own and the daemon's, which
// on the virtual machines measured was most of a tenth of a millisecond
// (scratch runs; ManagedPager's fill-us/op carries it).
//
// A punch that fails may have punched all the same — a helper killed
// between its fallocate and its answer — so the driver puts a failed
// Remove's bytes back from the frames before it gives them up
// (driver/pager.go, restoreHost).
//
// The protocol, on a SOCK_SEQPACKET socket pair, one request at a time
// per helper:
//
//	daemon           (take) clock.began, .ended, .waited := 0, 0, 0
//	daemon → helper  offset, length (two uint64s, native order), and the
//	                 memfd, as SCM_RIGHTS
//	helper           clock.began := now (CLOCK_MONOTONIC, ns);
//	                 fallocate(memfd, PUNCH_HOLE|KEEP_SIZE, offset, length);
//	                 clock.waited := what it waited asleep (offCPU);
//	                 clock.ended := now; closes its copy of the memfd
//	helper → daemon  the errno (a uint32; 0: done)
//
// The clock is a page the two processes share (a memfd, descriptor 4 in
// the helper): it tells the daemon when the fallocate began and ended, so
// that bounded judges the call itself, as it does a call of its own, and
// not the hand-offs around it. Counted from the request instead, the
// bound took in the time the helper waited for a core: another uid's
// hundreds of spinning threads made a well-behaved client's punch outlive
// it, and the client was dropped (TestAStrangersCPULoadBarsNoOtherUid).
// The clock is cleared when a request takes the helper, before bounded
// looks at it: cleared only when the request is sent, a caller held up
// on its way there read the previous request's start as its own, and
// judged it stuck.
//
// The helper ends when its socket reports end of file: the daemon closed
// its end, or died.

// punchHelperEnv, set to "1" in a process's environment, makes the
// process a punch helper: package server's init serves the socket at
// descriptor 3 and exits, before any main or TestMain runs. Any binary
// that links package server can be started that way, softgpud and test
// binaries alike, so the helper is always the daemon's own code.
const punchHelperEnv = "SOFTGPU_PUNCH_HELPER"

func init() {
	if os.Getenv(punchHelperEnv) == "1" {
		os.Exit(punchHelper(3, 4))
	}
}

// closeInherited closes every descriptor from first up that is not
// close-on-exec: one this process did not open (Go opens every
// descriptor close-on-exec), but inherited through the exec. The daemon
// hands a helper only its socket and clock page, but the kernel may
// install a descriptor in the daemon without close-on-exec — the
// userfaultfd a client's fork event carries, when the client made its
// own without O_CLOEXEC, open until the pager closes it — and a helper
// started in that moment would hold it, maybe for good
// (TestAHelperHoldsOnlyItsOwnDescriptors).
func closeInherited(first int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < first {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// punchRequestSize is a request's bytes, the memfd aside.
const punchRequestSize = 16

// punchHelper serves punch requests on the socket fd until end of file,
// marking in the page of clockFD when each fallocate begins and ends and
// what it waited (the protocol above), and returns the process's exit
// status.
func punchHelper(fd, clockFD int) int {
	closeInherited(clockFD + 1)
	page, err := unix.Mmap(clockFD, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintf(os.Stderr, "softgpu punch helper: descriptor %d is not the daemon's clock page: %v (%s is for the daemon's own helper process)\n", clockFD, err, punchHelperEnv)
		return 2
	}
	clock := clockOf(page)
	var req [punchRequestSize]byte
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, req[:], oob, unix.MSG_CMSG_CLOEXEC)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			fmt.Fprintf(os.Stderr, "softgpu punch helper: descriptor %d is not the daemon's socket: %v (%s is for the daemon's own helper process)\n", fd, err, punchHelperEnv)
			return 2
		case n == 0 && oobn == 0:
			return 0 // the daemon is done with this helper, or gone
		}
		errno := punchOne(req[:n], oob[:oobn], clock)
		var reply [4]byte
		binary.NativeEndian.PutUint32(reply[:], uint32(errno))
		for {
			if err = unix.Sendmsg(fd, reply[:], nil, nil, unix.MSG_NOSIGNAL); !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if err != nil {
			return 0 // the daemon let this helper go while it worked
		}
	}
}

// punchClock is the page a helper and the daemon share: when the helper
// began and ended the fallocate of the request in hand, CLOCK_MONOTONIC
// ns; 0: not yet. The helper writes it; the daemon clears it (take) and
// reads it (span).
type punchClock struct {
	began, ended atomic.Int64
	waited       atomic.Int64 // what the fallocate waited (offCPU), ns: written before ended
}

// punchOne carries out one request, marking on clock when its fallocate
// begins and ends, and returns its errno: EINVAL for a request that is
// not one.
func punchOne(req, oob []byte, clock *punchClock) syscall.Errno {
	memfd := -1
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
			memfd = fds[0]
		} else {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	if memfd < 0 {
		return syscall.EINVAL
	}
	defer unix.Close(memfd)
	if len(req) != punchRequestSize {
		return syscall.EINVAL
	}
	off := int64(binary.NativeEndian.Uint64(req[0:]))
	length := int64(binary.NativeEndian.Uint64(req[8:]))
	meter := startOffCPU() // this loop runs in init, on the main thread, which init keeps locked
	clock.began.Store(monotonicNow())
	defer func() {
		clock.waited.Store(int64(meter.waited()))
		clock.ended.Store(monotonicNow())
	}()
	for {
		err := unix.Fallocate(memfd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
		if errno, ok := err.(syscall.Errno); ok && errno == syscall.EINTR {
			continue
		} else if ok {
			return errno
		} else if err != nil {
			return syscall.EIO
		}
		return 0
	}
}

// puncher is the daemon's side: the helper waiting for work, if any,
// and those at work. Each request takes a helper to itself (take), and
// gives it back when the answer came (give), or lets it go (retire).
// Punches come one at a time — the driver punches with um.mu held — so
// one helper serves them all, unless one is stuck: then the next punch
// starts another. MANAGED_PAGER's ready, which makes sure a helper is
// waiting, takes and gives back without um.mu, so it may overlap a
// punch: then one of the two starts a helper, and give lets the second
// go when one waits already.
type puncher struct {
	mu     sync.Mutex
	exe    string                        // the helper's binary: "" is this one, /proc/self/exe (a test names another)
	idle   *punchHelperProc              // nil: none started, or it is at work
	busy   map[*punchHelperProc]struct{} // taken, not yet given back or retired
	closed bool
}

// punchHelperProc is one helper process, the daemon's end of its socket,
// and their clock page.
type punchHelperProc struct {
	sock int
	cmd  *exec.Cmd

	// mu guards page, which span reads — bounded's wait may, until the
	// call returns, whoever retired the helper meanwhile — and which the
	// helper's reaper unmaps once the helper has ended (retire).
	mu   sync.Mutex
	page []byte // the clock page (punchClock), mapped shared; nil once unmapped
}

// monotonicNow is CLOCK_MONOTONIC in nanoseconds: the clock the two
// processes share (Go's own monotonic readings are of this process only).
func monotonicNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// span returns when the helper began and ended the fallocate of the
// request in hand, on time.Now's clock, each the zero time if it has not:
// what bounded judges the call by (pagerCall.span).
func (h *punchHelperProc) span() (began, ended time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.page == nil {
		return time.Time{}, time.Time{}
	}
	c := clockOf(h.page)
	b, e := c.began.Load(), c.ended.Load()
	now, mono := time.Now(), monotonicNow()
	if b != 0 {
		began = now.Add(-time.Duration(mono - b))
	}
	if e != 0 && b != 0 {
		ended = now.Add(-time.Duration(mono - e))
	}
	return began, ended
}

// waited returns what the helper's fallocate of the request in hand
// waited, once it has ended: what pagerCall.waited says.
func (h *punchHelperProc) waited() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.page == nil {
		return 0
	}
	return time.Duration(clockOf(h.page).waited.Load())
}

// clear marks the helper's clock as not begun, for the request that takes
// it.
func (h *punchHelperProc) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := clockOf(h.page)
	c.began.Store(0)
	c.ended.Store(0)
	c.waited.Store(0)
}

// errPuncherClosed is a punch asked of a daemon that is closing.
var errPuncherClosed = errors.New("the daemon is closing: no punch helper")

// ready starts a helper, if none is waiting for work: MANAGED_PAGER calls
// it, so that a client's first device fault does not wait for one.
func (pu *puncher) ready() error {
	h, err := pu.take()
	if err != nil {
		return err
	}
	pu.give(h)
	return nil
}

// take returns a helper for one request, its clock cleared: the one
// waiting, or a new one.
func (pu *puncher) take() (*punchHelperProc, error) {
	pu.mu.Lock()
	if pu.closed {
		pu.mu.Unlock()
		return nil, errPuncherClosed
	}
	h, exe := pu.idle, pu.exe
	pu.idle = nil
	pu.mu.Unlock()
	if h == nil {
		if exe == "" {
			exe = "/proc/self/exe"
		}
		var err error
		if h, err = startPunchHelper(exe); err != nil {
			return nil, err
		}
	}
	h.clear()
	pu.mu.Lock()
	defer pu.mu.Unlock()
	if pu.closed { // closed while it started: close did not see it
		h.retire()
		return nil, errPuncherClosed
	}
	if pu.busy == nil {
		pu.busy = make(map[*punchHelperProc]struct{})
	}
	pu.busy[h] = struct{}{}
	return h, nil
}

// give puts h back for the next request, or lets it go if another helper
// waits already or the daemon is closing.
func (pu *puncher) give(h *punchHelperProc) {
	pu.mu.Lock()
	delete(pu.busy, h)
	keep := !pu.closed && pu.idle == nil
	if keep {
		pu.idle = h
	}
	pu.mu.Unlock()
	if !keep {
		h.retire()
	}
}

// lose lets h go after it failed to answer (retire): no request uses it
// again.
func (pu *puncher) lose(h *punchHelperProc) {
	pu.mu.Lock()
	delete(pu.busy, h)
	pu.mu.Unlock()
	h.retire()
}

// close lets the waiting helper go, and cuts off the requests in flight:
// each helper at work has its socket shut down, so that its request fails
// at once (errHelperLost) rather than hold um.mu while the daemon stops;
// no request starts another. Server.Close calls it first, before it tears
// the clients down, which needs um.mu.
func (pu *puncher) close() {
	pu.mu.Lock()
	pu.closed = true
	h := pu.idle
	pu.idle = nil
	for b := range pu.busy {
		unix.Shutdown(b.sock, unix.SHUT_RDWR) // the owner's read returns; the owner retires it
	}
	pu.mu.Unlock()
	if h != nil {
		h.retire()
	}
}

// startPunchHelper starts a helper process: exe — this binary, from
// /proc/self/exe, but for tests — with punchHelperEnv set, the far end of
// a new socket pair as descriptor 3 and the clock page's memfd as
// descriptor 4. It is in a process group of its own, so that a terminal's
// ^C reaches the daemon, which lets it go, and not the helper. It gets no
// other descriptor of the daemon's, not even its stdout and stderr (it
// has nothing to say there): a helper stuck on a client's lock outlives
// the daemon, and must hold nothing that someone waits to see closed — a
// supervisor reading the daemon's output until end of file would wait
// for the helper too.
func startPunchHelper(exe string) (h *punchHelperProc, err error) {
	memfd, err := unix.MemfdCreate("softgpu-punch-clock", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("starting a punch helper: memfd_create: %w", err)
	}
	clockFile := os.NewFile(uintptr(memfd), "punch helper clock")
	defer clockFile.Close() // the helper has its copy, and the page is mapped
	if err := unix.Ftruncate(memfd, int64(unix.Getpagesize())); err != nil {
		return nil, fmt.Errorf("starting a punch helper: ftruncate: %w", err)
	}
	page, err := unix.Mmap(memfd, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("starting a punch helper: mmap: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Munmap(page)
		return nil, fmt.Errorf("starting a punch helper: socketpair: %w", err)
	}
	far := os.NewFile(uintptr(fds[1]), "punch helper socket")
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{"softgpu-punch-helper"},
		Env:         []string{punchHelperEnv + "=1", "GOMAXPROCS=1"},
		ExtraFiles:  []*os.File{far, clockFile}, // descriptors 3 and 4; 0, 1 and 2 are /dev/null
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	far.Close()
	if err != nil {
		unix.Close(fds[0])
		unix.Munmap(page)
		return nil, fmt.Errorf("starting a punch helper: %w", err)
	}
	return &punchHelperProc{sock: fds[0], cmd: cmd, page: page}, nil
}

// punch asks h to punch [off, off+length) out of memfd and waits for the
// answer: until patience has passed since the helper began the fallocate
// (span), or, should the helper not begin at all, punchStartBound since
// the request went; once the fallocate has ended, punchStartBound from
// its end, as bounded waits for a call that ended in time. It returns the helper's errno as an error; a failure
// of the socket, or no answer in time, is errHelperLost, and h must then
// be let go (puncher.lose).
func (h *punchHelperProc) punch(memfd int, off, length int64, patience time.Duration) error {
	var req [punchRequestSize]byte
	binary.NativeEndian.PutUint64(req[0:], uint64(off))
	binary.NativeEndian.PutUint64(req[8:], uint64(length))
	for {
		err := unix.Sendmsg(h.sock, req[:], unix.UnixRights(memfd), nil, unix.MSG_NOSIGNAL) // a helper gone is EPIPE, not a signal
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: sending: %v", errHelperLost, err)
		}
		break
	}
	sent := time.Now()
	var reply [4]byte
	for {
		deadline := sent.Add(punchStartBound)
		if began, ended := h.span(); !ended.IsZero() {
			deadline = ended.Add(punchStartBound) // done in time: only the answer is on its way (TestAPunchThatEndedInTimeIsWaitedFor)
		} else if !began.IsZero() {
			deadline = began.Add(patience)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: no answer within %v of its start", errHelperLost, patience)
		}
		tv := unix.NsecToTimeval(min(left, patience).Nanoseconds())
		if err := unix.SetsockoptTimeval(h.sock, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("%w: SO_RCVTIMEO: %v", errHelperLost, err)
		}
		// A signal handler interrupts a receive with a timeout (EINTR,
		// never restarted), and the timeout itself reads as EAGAIN:
		// either way, the loop looks at the deadline again.
		n, err := unix.Read(h.sock, reply[:])
		switch {
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN):
			continue
		case err != nil:
			return fmt.Errorf("%w: receiving: %v", errHelperLost, err)
		case n != len(reply):
			return fmt.Errorf("%w: it answered %d bytes, or ended", errHelperLost, n)
		}
		if errno := syscall.Errno(binary.NativeEndian.Uint32(reply[:])); errno != 0 {
			return errno
		}
		return nil
	}
}

// punchStartBound is how long a helper may take to begin a request, with
// um.mu held: far above any wait for a core on a machine still of use,
// and far below cmd/softgpud's shutdown bound, which a Close that needs
// um.mu must finish within. A helper that takes longer is lost, and the
// run stays on the host.
const punchStartBound = time.Second

// errHelperLost is a punch helper that did not answer: stuck on a
// client's lock, without a core, or gone.
var errHelperLost = errors.New("the punch helper did not answer")

// retire lets h go: its socket is closed, so that it ends at its next
// read, and it is sent SIGKILL, which a helper asleep on a client's lock
// takes when the lock frees. Its exit is waited for on a goroutine of its
// own, which may wait as long as the client holds the lock, and then
// unmaps the clock page; no caller waits.
func (h *punchHelperProc) retire() {
	unix.Close(h.sock)
	h.cmd.Process.Kill()
	go func() {
		h.cmd.Wait()
		h.mu.Lock()
		unix.Munmap(h.page)
		h.page = nil
		h.mu.Unlock()
	}()
}
