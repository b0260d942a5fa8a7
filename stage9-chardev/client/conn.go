package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

// conn is a connection to the node: control calls out, replies back.
// Calls may come from many goroutines: one writes at a time, and one
// reader takes every reply and hands it to the caller waiting for its
// Seq.
type conn struct {
	node    string
	sock    *net.UnixConn
	writeMu sync.Mutex
	seq     atomic.Uint64
	pmu     sync.Mutex
	pending map[uint64]chan reply
	gone    atomic.Bool
	onLost  func()
	done    chan struct{} // closed when the reader has returned
}

// reply is one message from the daemon, and the descriptors with it.
type reply struct {
	msg []byte
	fds []int
	err error
}

// dialNode connects to node; onLost is called once if the daemon goes.
func dialNode(node string, onLost func()) (*conn, error) {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("softgpu: connecting to %s (is softgpud running?): %w", node, err)
	}
	c := &conn{node: node, sock: sock, pending: map[uint64]chan reply{}, onLost: onLost, done: make(chan struct{})}
	go c.reader()
	return c, nil
}

// reader reads every reply and hands it to its caller. When the
// connection ends, the daemon has gone (or close closed it): every
// pending call fails with ErrGone, and onLost runs.
func (c *conn) reader() {
	defer close(c.done)
	buf := make([]byte, uapi.MaxMessage+1)
	oob := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
	for {
		n, oobn, _, _, err := c.sock.ReadMsgUnix(buf, oob)
		if err == nil && n == 0 && oobn == 0 {
			err = ErrGone // SOCK_SEQPACKET: the daemon closed its end
		}
		if err != nil {
			c.lost()
			return
		}
		fds := uapi.ReceivedFDs(oob[:oobn])
		if n < uapi.HeaderSize {
			closeFDs(fds)
			continue
		}
		h := uapi.DecodeHeader(buf[:n])
		c.pmu.Lock()
		ch, ok := c.pending[h.Seq]
		delete(c.pending, h.Seq)
		c.pmu.Unlock()
		if !ok {
			closeFDs(fds) // a reply to nothing this client sent
			continue
		}
		ch <- reply{msg: append([]byte(nil), buf[:n]...), fds: fds}
	}
}

// lost fails every pending call and tells the owner.
func (c *conn) lost() {
	c.gone.Store(true)
	c.pmu.Lock()
	for seq, ch := range c.pending {
		ch <- reply{err: ErrGone}
		delete(c.pending, seq)
	}
	c.pmu.Unlock()
	if c.onLost != nil {
		c.onLost()
	}
}

// call makes one control call: arg out, arg back filled; fds go with it,
// and the reply's descriptors come back.
func (c *conn) call(arg uapi.Arg, fds []int) ([]int, error) {
	if c.gone.Load() {
		return nil, ErrGone
	}
	seq := c.seq.Add(1)
	ch := make(chan reply, 1)
	c.pmu.Lock()
	c.pending[seq] = ch
	c.pmu.Unlock()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.writeMu.Lock()
	_, _, err := c.sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), oob, nil)
	c.writeMu.Unlock()
	if err != nil {
		c.pmu.Lock()
		delete(c.pending, seq)
		c.pmu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrGone, err)
	}
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	h, err := uapi.DecodeReply(r.msg, len(r.fds), arg)
	if err != nil {
		closeFDs(r.fds)
		return nil, err
	}
	if h.Errno != uapi.OK {
		closeFDs(r.fds)
		return nil, h.Errno
	}
	return r.fds, nil
}

// versionError says why VERSION failed: above all, a daemon that
// refused this process because of the node's mode.
func versionError(node string, err error) error {
	if errors.Is(err, uapi.ErrPerm) {
		return fmt.Errorf("softgpu: the daemon at %s refused this process (uid %d): the node's owner and mode do not let it connect: %w", node, os.Getuid(), err)
	}
	if errors.Is(err, uapi.ErrVersion) {
		// The refusal carries no version: say this client's, and what
		// the major moved for (uapi/args.go).
		return fmt.Errorf("softgpu: the daemon at %s speaks a major version other than this client's %d.%d (since 3.0 a channel is served only after CHANNEL_START, which a 2.x daemon does not know and a 2.x client never calls): %w",
			node, uapi.VersionMajor, uapi.VersionMinor, err)
	}
	return fmt.Errorf("softgpu: VERSION: %w", err)
}

// close ends the connection and waits for the reader.
func (c *conn) close() {
	c.sock.Close()
	<-c.done
}

// Control is a connection for looking at the daemon, not using the
// device: VERSION, then INFO and CLIENT_INFO as often as wanted. It makes
// no context and opens no channel — softgpu-smi is its user.
type Control struct {
	c       *conn
	version uapi.Version
}

// DialControl connects to node (uapi.DefaultNode() if empty) and
// negotiates.
func DialControl(node string) (*Control, error) {
	if node == "" {
		node = uapi.DefaultNode()
	}
	c, err := dialNode(node, nil)
	if err != nil {
		return nil, err
	}
	ctl := &Control{c: c, version: uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}}
	if _, err := c.call(&ctl.version, nil); err != nil {
		c.close()
		return nil, versionError(node, err)
	}
	return ctl, nil
}

// Version returns what VERSION returned.
func (ctl *Control) Version() uapi.Version { return ctl.version }

// Info returns the daemon's INFO.
func (ctl *Control) Info() (uapi.Info, error) {
	var info uapi.Info
	_, err := ctl.c.call(&info, nil)
	return info, err
}

// Clients returns CLIENT_INFO for every connected client, this one
// included.
func (ctl *Control) Clients() ([]uapi.ClientInfo, error) {
	var out []uapi.ClientInfo
	for i := uint32(0); ; i++ {
		ci := uapi.ClientInfo{Index: i}
		if _, err := ctl.c.call(&ci, nil); err != nil {
			if errors.Is(err, uapi.ErrNoEntry) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ci)
	}
}

// Quotas returns CLIENT_QUOTA for every connected client, this one
// included: each one's use of the device-wide pools against its quotas.
// Every daemon of this client's major version has the call (it came in
// 2.1).
func (ctl *Control) Quotas() ([]uapi.ClientQuota, error) {
	var out []uapi.ClientQuota
	for i := uint32(0); ; i++ {
		q := uapi.ClientQuota{Index: i}
		if _, err := ctl.c.call(&q, nil); err != nil {
			if errors.Is(err, uapi.ErrNoEntry) {
				return out, nil
			}
			return out, err
		}
		out = append(out, q)
	}
}

// Close ends the connection.
func (ctl *Control) Close() error {
	ctl.c.close()
	return nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
