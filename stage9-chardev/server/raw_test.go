package server_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// A raw client speaks the node's protocol by hand — datagrams it builds
// itself, descriptors it chooses, stores it makes straight into the
// memory the daemon shared — so that a test can send what package client
// never would. Its calls and channel are the ones uapi/doc.go describes;
// everything it received is closed or unmapped when the test ends.

// rawConn is a raw client's connection to the node.
type rawConn struct {
	t    testing.TB
	sock *net.UnixConn
	seq  uint64 // the Seq of its last call

	ctx  abi.Context // from ATTACH
	kick int         // the kick eventfd from ATTACH, or -1
}

// dialRaw connects to node, and closes the connection when the test ends.
func dialRaw(t testing.TB, node string) *rawConn {
	t.Helper()
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	require.NoError(t, err, "connecting to %s", node)
	t.Cleanup(func() { sock.Close() })
	return &rawConn{t: t, sock: sock, kick: -1}
}

// send sends one datagram, with fds in SCM_RIGHTS if any.
func (r *rawConn) send(msg []byte, fds ...int) {
	r.t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	r.sock.SetWriteDeadline(time.Now().Add(patience))
	if _, _, err := r.sock.WriteMsgUnix(msg, oob, nil); err != nil {
		r.t.Fatalf("sending %d bytes and %d fds: %v", len(msg), len(fds), err)
	}
}

// recv reads one reply and the descriptors with it (closed when the test
// ends). It fails the test if none comes within patience, or if the daemon
// closes the connection instead.
func (r *rawConn) recv() (msg []byte, fds []int) {
	r.t.Helper()
	buf := make([]byte, uapi.MaxMessage+1)
	oob := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
	r.sock.SetReadDeadline(time.Now().Add(patience))
	n, oobn, _, _, err := r.sock.ReadMsgUnix(buf, oob)
	if err != nil {
		r.t.Fatalf("no reply from the daemon: %v", err)
	}
	if n == 0 && oobn == 0 {
		r.t.Fatalf("the daemon closed the connection instead of replying")
	}
	fds = parseRights(oob[:oobn])
	r.t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	if n < uapi.HeaderSize {
		r.t.Fatalf("reply of %d bytes, shorter than a header", n)
	}
	return buf[:n], fds
}

// sendRecv sends msg with fds and returns the reply's header. The reply
// must carry no descriptor and no payload but zeroes: it is an error
// reply, or the test has a bug.
func (r *rawConn) sendRecv(msg []byte, fds ...int) uapi.Header {
	r.t.Helper()
	r.send(msg, fds...)
	reply, got := r.recv()
	if len(got) != 0 {
		r.t.Errorf("reply with errno %v carries %d descriptors", uapi.DecodeHeader(reply).Errno, len(got))
	}
	for _, b := range reply[uapi.HeaderSize:] {
		if b != 0 {
			r.t.Errorf("reply with errno %v has a payload that is not zero", uapi.DecodeHeader(reply).Errno)
			break
		}
	}
	return uapi.DecodeHeader(reply)
}

// call makes one well-formed call: arg out, arg back filled on success.
// It returns the reply's errno and descriptors. A reply that does not
// decode (uapi.DecodeReply), or whose Seq is not the call's, fails the test.
func (r *rawConn) call(arg uapi.Arg, fds ...int) (uapi.Errno, []int) {
	r.t.Helper()
	r.seq++
	r.send(uapi.EncodeCall(r.seq, arg), fds...)
	reply, got := r.recv()
	h, err := uapi.DecodeReply(reply, len(got), arg)
	if err != nil {
		r.t.Fatalf("reply to %T does not decode: %v", arg, err)
	}
	if h.Seq != r.seq {
		r.t.Fatalf("reply to %T has Seq %d; want %d", arg, h.Seq, r.seq)
	}
	return h.Errno, got
}

// mustCall makes a call that must succeed.
func (r *rawConn) mustCall(arg uapi.Arg, fds ...int) []int {
	r.t.Helper()
	errno, got := r.call(arg, fds...)
	if errno != uapi.OK {
		r.t.Fatalf("%T call: %v", arg, errno)
	}
	return got
}

// negotiate makes VERSION.
func (r *rawConn) negotiate() {
	r.t.Helper()
	r.mustCall(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})
}

// attach negotiates and ATTACHes: the raw client gets a context and the
// kick eventfd.
func (r *rawConn) attach() {
	r.t.Helper()
	r.negotiate()
	var a uapi.Attach
	fds := r.mustCall(&a)
	r.ctx, r.kick = abi.Context(a.Context), fds[uapi.AttachFDKick]
}

// alloc allocates size bytes of device memory in the raw client's context.
func (r *rawConn) alloc(size uint64) uint64 {
	r.t.Helper()
	a := uapi.Alloc{Size: size}
	r.mustCall(&a)
	return a.VA
}

// hostRegister makes a sealed memfd of size bytes, maps it, and registers
// it: the device reaches the returned bytes at the returned address.
func (r *rawConn) hostRegister(size uint64) (va uint64, mem []byte) {
	r.t.Helper()
	fd := newMemfd(r.t, size, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	defer unix.Close(fd)
	mem = mapMemfd(r.t, fd, size)
	reg := uapi.HostRegister{Size: size}
	r.mustCall(&reg, fd)
	return reg.VA, mem
}

// newMemfd makes a memfd of size zero bytes named hostile-host with seals
// (none if 0). The caller closes it.
func newMemfd(t testing.TB, size uint64, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("hostile-host", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	require.NoError(t, err, "memfd_create")
	require.NoError(t, unix.Ftruncate(fd, int64(size)), "sizing a memfd")
	if seals != 0 {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		require.NoError(t, err, "sealing a memfd")
	}
	return fd
}

// mapMemfd maps size bytes of fd read-write, unmapped when the test ends.
func mapMemfd(t testing.TB, fd int, size uint64) []byte {
	t.Helper()
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err, "mapping a memfd")
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

// rawChannel is a channel a raw client opened and mapped by hand, as
// client.GPU.NewChannel does: the user memfd read-write (doorbell page,
// then the submission ring), the status memfd read-only (status page,
// then the completion ring), at the offsets of uapi/memfd.go.
type rawChannel struct {
	r          *rawConn
	id         abi.Channel
	size, mask uint64
	user       []byte // written by the raw client: RegDoorbell, RegIrqArm, the slots
	status     []byte // written by the engine: RegChannelFault, the completions
	head       uint64 // the doorbell as the channel was handed over: the engine's head
	next       uint64 // private shadow: the index the next put writes
}

// openChannel opens and maps a channel of engine e.
func (r *rawConn) openChannel(e abi.Engine) *rawChannel {
	r.t.Helper()
	open := uapi.ChannelOpen{Engine: uint32(e), Priority: abi.PriorityNormal}
	fds := r.mustCall(&open)
	user, err := unix.Mmap(fds[uapi.ChannelFDUser], 0, int(open.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		r.t.Fatalf("mapping channel %d's user memfd: %v", open.Channel, err)
	}
	r.t.Cleanup(func() { unix.Munmap(user) })
	status, err := unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(open.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		r.t.Fatalf("mapping channel %d's status memfd: %v", open.Channel, err)
	}
	r.t.Cleanup(func() { unix.Munmap(status) })
	// Every page of both ours, then CHANNEL_START (uapi.ChannelStart).
	require.NoError(r.t, unix.Madvise(user, unix.MADV_POPULATE_WRITE), "populating channel %d's user memfd", open.Channel)
	require.NoError(r.t, unix.Madvise(status, unix.MADV_POPULATE_READ), "populating channel %d's status memfd", open.Channel)
	r.mustCall(&uapi.ChannelStart{Channel: open.Channel})
	size := uint64(open.RingSize)
	head := word(user, abi.RegDoorbell).Load()
	return &rawChannel{r: r, id: abi.Channel(open.Channel), size: size, mask: size - 1, user: user, status: status, head: head, next: head}
}

// slot returns the submission slot of ring index i.
func (ch *rawChannel) slot(i uint64) []byte {
	return ch.user[uapi.UserRingOffset+abi.SlotOffset(i, ch.mask):][:abi.CommandSize]
}

// put writes cmd into the next slot, with that slot's index as its Seq,
// and returns the index. It does not ring.
func (ch *rawChannel) put(cmd abi.Command) uint64 {
	i := ch.next
	cmd.Seq = i
	cmd.Encode(ch.slot(i))
	ch.next++
	return i
}

// ring stores tail in the doorbell and kicks the daemon, which wakes the
// engine if it was asleep (a kick to a running engine costs nothing).
// The store publishes the slot writes before it.
func (ch *rawChannel) ring(tail uint64) {
	word(ch.user, abi.RegDoorbell).Store(tail)
	one := [8]byte{1}
	unix.Write(ch.r.kick, one[:])
}

// completion returns whether command i has completed, and its status.
func (ch *rawChannel) completion(i uint64) (bool, abi.Status) {
	w := uapi.StatusCompletionsOffset + 8*abi.CompletionWord(i, ch.mask)
	if !abi.Completed(word(ch.status, w+8*uapi.CompletionIndexWord).Load(), i) {
		return false, 0
	}
	return true, abi.Status(word(ch.status, w+8*uapi.CompletionStatusWord).Load())
}

// wait waits for command i to complete and returns its status.
func (ch *rawChannel) wait(i uint64) abi.Status {
	ch.r.t.Helper()
	var status abi.Status
	waitFor(ch.r.t, fmt.Sprintf("command %d completing on %v", i, ch.id), func() (bool, string) {
		done, st := ch.completion(i)
		status = st
		return done, "fault " + ch.fault().String()
	})
	return status
}

// fault returns the channel's RegChannelFault.
func (ch *rawChannel) fault() abi.ChannelFault {
	return abi.ChannelFault(word(ch.status, uapi.StatusPageOffset+abi.RegChannelFault).Load())
}

// parseRights returns the descriptors in a message's control data.
func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}
