package client

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

// The client's half of the pager (server/pager.go says the protocol):
// each managed allocation's mapping is registered with a userfaultfd of
// the client's, in missing and write-protect mode, and the descriptor
// goes to the daemon (MANAGED_PAGER), which from then on answers the
// client's faults on it. So Bytes is simply memory: a page the device
// has faults when the client touches it, and the daemon brings it back
// before the access completes; Sync and Prefetch remain, as hints that
// move many pages in one call.
//
// The client never reads its own userfaultfd: a Go program cannot answer
// its own faults (cmd/uffdstw). It keeps the descriptor open all the
// same, for as long as the mapping lives: were the daemon's copy the
// last, the daemon's death would release the registration, and a waiting
// access would go on to read a zero page.
//
// Liveness: one socket pair per paged allocation. The client's end is
// armed with O_ASYNC, F_SETOWN (this process) and F_SETSIG (SIGKILL); the
// other end goes to the daemon with MANAGED_PAGER, and the client closes
// its copy. When the daemon dies, or lets the allocation go without the
// client asking (it dropped the client), its end closes and the kernel
// sends the client SIGKILL: a client does not outlive the process that
// answers its faults. Free, and Close for every allocation still paged,
// disarm the client's end first, so that a clean end kills nobody.

// armedPair makes a liveness socket pair: the client's end, armed, and
// the daemon's.
func armedPair() (own, peer int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("softgpu: liveness socket: %w", err)
	}
	if err := arm(fds[0]); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return -1, -1, fmt.Errorf("softgpu: arming the liveness socket: %w", err)
	}
	return fds[0], fds[1], nil
}

// arm makes fd's peer closing send this process SIGKILL.
func arm(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, unix.Getpid()); err != nil {
		return err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETSIG, int(unix.SIGKILL)); err != nil {
		return err
	}
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_ASYNC|unix.O_NONBLOCK)
	return err
}

// disarm closes the client's end of a liveness pair, unarmed first.
func disarm(fd int) {
	unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK) // O_ASYNC off
	unix.Close(fd)
}

// pagedSet is a GPU's allocations that have a pager, for Close to
// disarm; guarded by mu.
type pagedSet struct {
	mu  sync.Mutex
	set map[*Managed]struct{}
}

func (ps *pagedSet) add(m *Managed) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.set == nil {
		ps.set = map[*Managed]struct{}{}
	}
	ps.set[m] = struct{}{}
}

// remove disarms m's liveness socket and forgets m.
func (ps *pagedSet) remove(m *Managed) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.set[m]; ok {
		disarm(m.live)
		delete(ps.set, m)
	}
}

// disarmAll disarms every allocation's liveness socket: Close, before the
// connection ends.
func (ps *pagedSet) disarmAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for m := range ps.set {
		disarm(m.live)
	}
	ps.set = nil
}

// ErrNoPager reports that the pager could not be set up for an
// allocation: userfaultfd is not permitted here, or the daemon bars this
// uid from its pager for now (every daemon of this client's major
// version has MANAGED_PAGER, which came in 2.2). The allocation works as
// before: the host Syncs.
var ErrNoPager = errors.New("softgpu: no pager for managed memory")

// ANCHOR: startpager

// startPager registers m's mapping with a new userfaultfd and hands it
// to the daemon. Unprivileged, where vm.unprivileged_userfaultfd is 0,
// only a user-mode-only descriptor is allowed; then a system call that
// touches a page on the device fails with EFAULT instead of faulting to
// the daemon, and the caller must bring the range home (Sync or Prefetch
// to the host) before handing Bytes to one.
func (m *Managed) startPager() error {
	g := m.g
	if pid, err := m.g.daemonPID(); err != nil || pid == unix.Getpid() {
		// A daemon in this very process (a test's, or an embedding
		// program's) would answer its own process's faults: the hang
		// cmd/uffdstw shows. Such a client Syncs, as in-process.
		return fmt.Errorf("%w: the daemon runs in this process", ErrNoPager)
	}
	flags := uint64(0)
	fd, err := uffd.Open(0, uffd.FeatureWPShmem)
	if errors.Is(err, unix.EPERM) {
		flags = uapi.PagerUserModeOnly
		fd, err = uffd.Open(uffd.UserModeOnly, uffd.FeatureWPShmem)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoPager, err)
	}
	base := uffd.Address(m.mapping)
	if err := uffd.Register(fd, base, uint64(len(m.mapping)), uffd.ModeMissing|uffd.ModeWP); err != nil {
		unix.Close(fd)
		return fmt.Errorf("%w: %w", ErrNoPager, err)
	}
	own, peer, err := armedPair()
	if err != nil {
		unix.Close(fd)
		return err
	}
	a := uapi.ManagedPager{VA: m.va, Base: base, Length: uint64(len(m.mapping)), Flags: flags}
	_, err = g.call(&a, []int{fd, peer})
	if err != nil {
		// Disarmed before the peer's last copy goes: the daemon closed
		// the one it was sent when it refused, so closing this one
		// closes the pair's other end, which kills an armed client.
		disarm(own)
		unix.Close(peer)
		unix.Close(fd) // the registration goes with it
		if errors.Is(err, uapi.ErrPerm) {
			// The daemon bars this uid from its pager for a while: a
			// client of the uid held up a call into its memory
			// (server/pager.go, pagerBars).
			return fmt.Errorf("%w: %w", ErrNoPager, err)
		}
		return g.err(err)
	}
	unix.Close(peer) // the daemon holds its own copy, as long as the pager lives
	m.uffd, m.live, m.userModeOnly = fd, own, flags != 0
	g.paged.add(m)
	return nil
}

// ANCHOR_END: startpager

// Paged reports whether the daemon pages m: whether the host may touch
// Bytes with no Sync.
func (m *Managed) Paged() bool { return m.uffd >= 0 }

// disarmPager disarms m's liveness socket: Free, before MANAGED_FREE,
// whose pager's end then closes.
func (m *Managed) disarmPager() { m.g.paged.remove(m) }

// stopPager closes m's userfaultfd, once its mapping is gone.
func (m *Managed) stopPager() {
	if m.uffd >= 0 {
		unix.Close(m.uffd)
		m.uffd = -1
	}
}

// daemonPID returns the process id of the daemon at the other end of the
// connection, as the kernel recorded it (SO_PEERCRED).
func (g *GPU) daemonPID() (int, error) {
	raw, err := g.conn.sock.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// UserModeOnly reports whether m's userfaultfd traps user-mode faults
// only (an unprivileged client where vm.unprivileged_userfaultfd is 0):
// then a system call given a range of Bytes that holds a page on the
// device fails with EFAULT, and the program brings the range home first
// (Sync, or Prefetch to the host).
func (m *Managed) UserModeOnly() bool { return m.userModeOnly }
