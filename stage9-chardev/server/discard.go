package server

import (
	"net"

	"golang.org/x/sys/unix"
)

// Descriptors a client sent, and closing them.
//
// Every message may carry descriptors (SCM_RIGHTS), and the kernel puts
// them in the daemon's table as it reads the message: the daemon cannot
// refuse them, only close them. Closing one is not always quick. close(2)
// runs the file's own code, chosen by whoever made the file: a TCP socket
// with SO_LINGER set and data its peer never reads waits out its linger
// time, up to hours; a file on a FUSE mount waits for the mount's server,
// which may be the client itself. A close that waits holds the thread
// that made it, and everything waiting for that thread: the client's
// serve loop (no more calls read, no teardown), and Server.Close, which
// waits for every serve loop — SIGTERM would not stop the daemon.
//
// A socket passes that on. Closing the last descriptor of a Unix domain
// socket frees the messages still queued in it, and with them the
// descriptors they carry, whose closes run on the same thread: a client
// that leaves a lingering socket in flight in its own connection, or in
// the liveness socket MANAGED_PAGER keeps (pager.go), makes the daemon's
// close of that socket wait as long.
//
// So a descriptor whose close cannot wait is closed where it is let go,
// and any other on a goroutine of its own that nothing waits for: not
// serve, not teardown, not Server.Close. Each such close that has not
// returned holds a thread of the daemon's, so a client may have at most
// maxDiscarding of the ones it sent in messages: one more, and the client
// is dropped, so it sends no more. A socket the daemon holds — a client's
// connection, a pager's liveness socket — is shut for reading first, so
// that nothing more can be queued in it, and closed on a goroutine of its
// own too, whatever is queued in it (a queue cannot be told empty: a
// message of no bytes reads as the end of the stream), one per connection
// or pager. A close still waiting when the daemon exits ends with the
// process.
//
// And no message is read in part: the kernel closes the descriptors a
// read has no room for, on the reading thread, so serve makes room for
// the most a message can carry (maxFDsRead).

// maxDiscarding is how many of a client's descriptors may be closing at
// once on their own goroutines (above).
const maxDiscarding = 8

// closeMayWait reports whether close(2) of fd might wait. It names the
// kinds whose close never does — memfds and tmpfs files, anonymous inodes
// (eventfd, userfaultfd), pipes — and says yes for everything else,
// sockets of every kind (above) and what it cannot inspect included.
func closeMayWait(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil {
		return true
	}
	switch fs.Type {
	case unix.TMPFS_MAGIC, unix.HUGETLBFS_MAGIC, unix.ANON_INODE_FS_MAGIC, unix.PIPEFS_MAGIC:
		return false
	}
	return true
}

// discard closes descriptors the client sent (above). It reports false
// if the client now has more than maxDiscarding closes in flight: its
// caller drops it.
func (c *client) discard(fds []int) bool {
	ok := true
	for _, fd := range fds {
		if !closeMayWait(fd) {
			unix.Close(fd)
			continue
		}
		// The Add here pairs with the Add(-1) when the close returns: the
		// count is of closes begun and not yet returned.
		if c.discarding.Add(1) > maxDiscarding {
			ok = false
		}
		go func() {
			unix.Close(fd)
			c.discarding.Add(-1)
		}()
	}
	return ok
}

// shutRead shuts the socket fd for reading: nothing more can be queued in
// it. Its peer's sends fail from here on (EPIPE); the peer is not
// signalled (a shutdown signals a peer's owner only when it ends the
// peer's reading, and this ends its writing).
func shutRead(fd int) { unix.Shutdown(fd, unix.SHUT_RD) }

// closeSocket closes a socket the daemon holds and has shut for reading
// (shutRead), on a goroutine of its own (above).
func closeSocket(fd int) { go unix.Close(fd) }

// hangUp ends a client's connection both ways without closing it: serve's
// read returns as at the client's own close, and every send to the client
// fails. The connection itself is closed by closeConn, which teardown
// calls last.
func hangUp(conn *net.UnixConn) {
	if raw, err := conn.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	}
}

// closeConn closes a client's connection: hung up (hangUp), then closed
// on a goroutine of its own (above), since the client may have left
// messages carrying descriptors queued in it.
func closeConn(conn *net.UnixConn) {
	hangUp(conn)
	go conn.Close()
}
