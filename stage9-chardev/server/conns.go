package server

// Connections, the first pool a stranger can drain: each costs the
// daemon a descriptor and a goroutine before it has made a single call.
// Three rules keep the daemon serving:
//
//   - one uid holds at most Config.MaxConnsPerUID connections; past it a
//     new one is closed as soon as it is accepted (admitConn), so one
//     user's thousand connections leave every other uid room;
//   - a connection that has not attached is dropped once it has gone
//     Config.AttachTimeout without a call (readDeadline): connecting and
//     saying nothing holds nothing for long. A control connection
//     (softgpu-smi) that keeps calling INFO stays;
//   - accept failing for want of descriptors, socket buffers or memory
//     (EMFILE, ENFILE, ENOBUFS, ENOMEM) is a reason to wait and retry
//     (acceptBackoff), logged once per burst; it never stops Serve.

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// DefaultMaxConnsPerUID and DefaultAttachTimeout are Config's defaults.
const (
	DefaultMaxConnsPerUID = 64
	DefaultAttachTimeout  = 10 * time.Second
)

// ErrTooManyConns reports a connection past its uid's cap.
var ErrTooManyConns = errors.New("softgpu: too many connections from one uid")

// admitConn refuses a connection of uid past its cap. s.mu is held.
func (s *Server) admitConn(uid uint32) error {
	n := 0
	for _, c := range s.clients {
		if c.uid == uid {
			n++
		}
	}
	if n >= s.cfg.MaxConnsPerUID {
		return fmt.Errorf("%w: uid %d holds %d, the most it may (-max-conns-per-uid)", ErrTooManyConns, uid, n)
	}
	return nil
}

// readDeadline sets the deadline of the client's next read: AttachTimeout
// from now until it has attached, none after. serve calls it before each
// read, on the client's goroutine, which alone sets c.ctx.
func (c *client) readDeadline() {
	if c.ctx == nil {
		c.conn.SetReadDeadline(time.Now().Add(c.s.cfg.AttachTimeout))
	} else {
		c.conn.SetReadDeadline(time.Time{})
	}
}

// isTimeout reports whether a read ended at its deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ANCHOR: backoff

// acceptBackoff is Serve's answer to an accept error: for a temporary
// shortage it waits (5 ms, doubling to 1 s, or until Close) and returns
// true. burst counts the failures in a row, which Serve clears on the
// next accept that succeeds; a burst is logged once, and a shortage that
// comes and goes with every freed descriptor is one burst until it has
// been quiet for backoffQuiet (lastLog).
func (s *Server) acceptBackoff(err error, burst *int, lastLog *time.Time) bool {
	if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) &&
		!errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.ENOMEM) {
		return false
	}
	if *burst == 0 && time.Since(*lastLog) > backoffQuiet {
		s.log.Warn("accept: out of resources; backing off until they come back", "err", err)
	}
	*lastLog = time.Now()
	wait := min(5*time.Millisecond<<min(*burst, 8), time.Second)
	*burst++
	select {
	case <-time.After(wait):
	case <-s.closed:
	}
	return true
}

// ANCHOR_END: backoff

// backoffQuiet is how long accept must go without a shortage before the
// next one is logged as a new burst.
const backoffQuiet = 10 * time.Second
