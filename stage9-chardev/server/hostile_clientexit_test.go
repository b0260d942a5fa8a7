package server_test

// A client that exits is torn down, whatever holds its end of the
// connection (exitwatch.go), and MANAGED_PAGER's liveness socket is one
// end of a Unix socket pair (pager.go).

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["rt-live"] = rtLive
	strangerRoles["rt-inflightlive"] = rtInflightLive
}

// rtLive: MANAGED_PAGER with the liveness socket its argument names —
// "self", the client's own end of its connection to the node; "tcp", a
// TCP socket lingering with data its peer never reads — and it says
// whether the call was refused.
func rtLive(node, arg string) error {
	live := map[string]func(self int) (int, error){
		"self": func(self int) (int, error) { return self, nil },
		"tcp":  func(int) (int, error) { return lingeringTCP() },
	}[arg]
	if live == nil {
		return fmt.Errorf("rt-live: no liveness socket %q", arg)
	}
	err := rtPager(node, live)
	switch {
	case errors.Is(err, uapi.ErrInval):
		fmt.Println("refused " + uapi.ErrInval.Error())
	case err != nil:
		return err
	default:
		fmt.Println("taken")
	}
	fmt.Println("done")
	return nil
}

// rtInflightLive: MANAGED_PAGER with one end of a fresh socket pair as
// the liveness socket, as the client library gives — but with the
// client's own end of its connection to the node sent into that end
// first, so that the daemon, holding the liveness socket, holds the
// connection's end too; then it exits.
func rtInflightLive(node, _ string) error {
	err := rtPager(node, func(self int) (int, error) {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err := unix.Sendmsg(pair[1], []byte{0}, unix.UnixRights(self), nil, 0); err != nil {
			return -1, err
		}
		return pair[0], nil
	})
	if err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

// rtPager makes a managed allocation with a pager, giving MANAGED_PAGER
// the liveness socket live returns (self: the client's end of its
// connection).
func rtPager(node string, live func(self int) (int, error)) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	var self int
	raw, _ := sock.SyscallConn()
	raw.Control(func(fd uintptr) { self = int(fd) })
	seq := uint64(0)
	call := func(arg uapi.Arg, fds ...int) error {
		seq++
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), oob, nil); err != nil {
			return err
		}
		buf := make([]byte, uapi.MaxMessage+1)
		rob := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
		n, oobn, _, _, err := sock.ReadMsgUnix(buf, rob)
		if err != nil {
			return err
		}
		got := uapi.ReceivedFDs(rob[:oobn])
		h, err := uapi.DecodeReply(buf[:n], len(got), arg)
		if err == nil && h.Errno != uapi.OK {
			err = h.Errno
		}
		return err
	}
	if err := call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		return err
	}
	if err := call(&uapi.Attach{}); err != nil {
		return err
	}
	const size = 64 << 10
	memfd, err := unix.MemfdCreate("rt", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return err
	}
	unix.Ftruncate(memfd, size)
	unix.FcntlInt(uintptr(memfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	ma := &uapi.ManagedAlloc{Size: size, Length: size}
	if err := call(ma, memfd); err != nil {
		return fmt.Errorf("MANAGED_ALLOC: %w", err)
	}
	mapping, err := unix.Mmap(memfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	flags := uint64(0)
	ufd, err := uffd.Open(0, uffd.FeatureWPShmem)
	if errors.Is(err, unix.EPERM) {
		flags = uapi.PagerUserModeOnly
		ufd, err = uffd.Open(uffd.UserModeOnly, uffd.FeatureWPShmem)
	}
	if err != nil {
		return err
	}
	base := uffd.Address(mapping)
	if err := uffd.Register(ufd, base, size, uffd.ModeMissing|uffd.ModeWP); err != nil {
		return err
	}
	lfd, err := live(self)
	if err != nil {
		return err
	}
	if err := call(&uapi.ManagedPager{VA: ma.VA, Base: base, Length: size, Flags: flags}, ufd, lfd); err != nil {
		return fmt.Errorf("MANAGED_PAGER: %w", err)
	}
	return nil
}

// TestAClientThatExitsIsTornDownWhateverItsLivenessSocket: a client's
// exit must end it on the daemon, whatever else holds its end of the
// connection. MANAGED_PAGER keeps the liveness socket until the pager
// stops, at MANAGED_FREE or teardown; a stranger that first sends its own
// end of its connection into that socket leaves it in flight there, so
// the daemon holds both ends and its exit never reads as EOF. The daemon
// watches the process itself (exitwatch.go) and tears it down.
func TestAClientThatExitsIsTornDownWhateverItsLivenessSocket(t *testing.T) {
	d := startDaemon(t)
	ctl := control(t, d.node)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-inflightlive", d.node, "", cred)
	s.findings(t) // it has exited
	// By its pid, not by a count of clients: a count taken before the
	// stranger came may still hold startDaemon's probe, whose teardown
	// the daemon finishes after its connection closes (a run of go test
	// work read 2 clients there, and waited in vain for 2 after).
	waitNoClientOf(t, ctl, uint32(s.cmd.Process.Pid))
	d.live(t, "a stranger gone with its connection in flight in its liveness socket")
	d.stop(t)
}

// TestAPagersLivenessSocketIsOneEndOfASocketPair: the daemon closes the
// liveness socket MANAGED_PAGER keeps when the pager stops, and holds it
// until then. The call refuses, with ErrInval, a TCP socket (whose close
// can wait for its linger time) and the client's own end of its
// connection (which, held, would keep the connection open after the
// client's exit).
func TestAPagersLivenessSocketIsOneEndOfASocketPair(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	for _, live := range []string{"tcp", "self"} {
		got := startStranger(t, "rt-live", d.node, live, cred).findings(t)
		assert.Equal(t, []string{"refused " + uapi.ErrInval.Error()}, got, "MANAGED_PAGER with liveness socket %q", live)
	}
	d.live(t, "strangers that offered a TCP socket and their own connection for liveness")
	d.stop(t)
}
