package server

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A daemon no client can reach has stopped serving, and must say so.
//
// Contract: while Serve runs, watchNode checks every nodeCheck that the
// node's path still names the socket New bound there, and that the
// listening socket has not been shut down. When either fails, Serve
// returns an error wrapping ErrNodeLost (softgpud exits non-zero with it,
// cmd/softgpud). Two ways it happens without a signal:
//
//   - the node's path is removed or replaced: logind removes
//     $XDG_RUNTIME_DIR at logout, an operator cleans /tmp. The listener
//     still works, but no client can name it: accept would wait for
//     ever. A replaced path is someone else's file, so the daemon does
//     not unlink it on its way out.
//   - the listening socket is shut down under the daemon: a process of
//     its uid with ptrace rights can take a duplicate of it (pidfd_getfd)
//     and shutdown(2) it. Connects are refused from then on, and on Linux
//     the shutdown wakes no accept, so the daemon would sleep in accept
//     for ever.
//
// Who writes what: watchNode writes s.lost and the listener's unlink
// flag, and closes the listener, all under s.mu and only while
// !s.closing; Close sets s.closing under s.mu before it closes the
// listener itself, so the two never race (the pair: watchNode's locked
// section, Close's). Serve reads s.lost under s.mu once accept fails.

// ErrNodeLost reports that no client can reach the daemon any more: its
// node's path no longer names its socket, or the socket was shut down.
var ErrNodeLost = errors.New("softgpu: the node no longer reaches this daemon")

// nodeCheck is how often watchNode looks: a Lstat and a poll of one
// descriptor, nothing a client's latency could feel, and soon enough
// that whoever started the daemon hears within a second that it
// stopped serving.
const nodeCheck = 250 * time.Millisecond

// watchNode runs beside Serve's accept loop until the daemon closes or
// it finds the node lost; then it records why and closes the listener,
// so that accept returns and Serve returns the reason.
func (s *Server) watchNode() {
	tick := time.NewTicker(nodeCheck)
	defer tick.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-tick.C:
		}
		lost, replaced := s.nodeLost()
		if lost == nil {
			continue
		}
		s.mu.Lock()
		if !s.closing {
			s.lost = lost
			if replaced {
				s.ln.SetUnlinkOnClose(false) // not ours any more
			}
			s.ln.Close()
		}
		s.mu.Unlock()
		return
	}
}

// nodeLost says why the node no longer reaches the daemon, or nil; and
// whether something else now stands at its path.
func (s *Server) nodeLost() (lost error, replaced bool) {
	fi, err := os.Lstat(s.node)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s was removed", ErrNodeLost, s.node), false
	case err == nil && !os.SameFile(fi, s.nodeFile):
		return fmt.Errorf("%w: %s was replaced", ErrNodeLost, s.node), true
	}
	raw, err := s.ln.SyscallConn()
	if err != nil {
		return nil, false
	}
	var revents int16
	raw.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
		if n, err := unix.Poll(p, 0); err == nil && n == 1 {
			revents = p[0].Revents
		}
	})
	if revents&(unix.POLLHUP|unix.POLLRDHUP) != 0 {
		return fmt.Errorf("%w: its listening socket on %s was shut down", ErrNodeLost, s.node), false
	}
	return nil, false
}
