package server

import (
	"os"

	"golang.org/x/sys/unix"
)

// A client is the process that connected, and it is gone when that
// process is.
//
// The daemon usually learns that a client went from its connection: when
// the last descriptor of the client's end closes, the daemon's read sees
// EOF and teardown runs. But the client's end is a file, and a file
// outlives its process if anything else holds it — a child that
// inherited it, or the daemon itself, handed the client's end as a
// descriptor: as MANAGED_PAGER's liveness socket, say, or in flight in a
// socket the daemon keeps. Then the process can exit with its context,
// memory and quota held for as long as the daemon runs. So the daemon
// also watches the process itself: SO_PEERPIDFD gives a pidfd for the
// process that connected (taken by the kernel at connect, so no reused
// pid can stand in for it), and a pidfd reads as ready when its process
// has exited. The watch then hangs up the daemon's end of the connection
// (hangUp), which ends serve's read as EOF does, and teardown runs as it
// always does.
//
// The pidfd sits in the Go runtime's poller: a watch costs no thread
// while it waits. Teardown closes it, which ends the watch.

// watchExit starts the watch of the client's process (above); it returns
// nil, and the client is watched only through its connection, if the
// kernel gives no pidfd for the peer (SO_PEERPIDFD came in Linux 6.5).
func (c *client) watchExit() *os.File {
	raw, err := c.conn.SyscallConn()
	if err != nil {
		return nil
	}
	pidfd := -1
	raw.Control(func(fd uintptr) {
		pidfd, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	})
	if err != nil || pidfd < 0 {
		c.s.log.Debug("no pidfd for a client: it is watched through its connection only", "pid", c.pid, "err", err)
		return nil
	}
	unix.CloseOnExec(pidfd)
	if err := unix.SetNonblock(pidfd, true); err != nil { // os.NewFile puts a non-blocking descriptor in the poller
		unix.Close(pidfd)
		return nil
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	c.s.serving.Go(func() {
		// Read calls exited until it reports true, waiting in the poller
		// for the pidfd to be readable between calls; it returns an error
		// instead when teardown closes f.
		err := rc.Read(func(fd uintptr) bool { return exited(int(fd)) })
		if err == nil {
			c.s.log.Debug("client's process exited: hanging up", "pid", c.pid)
			hangUp(c.conn) // discard.go
		}
	})
	return f
}

// exited reports whether the process of pidfd has exited: whether the
// pidfd polls readable now.
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
