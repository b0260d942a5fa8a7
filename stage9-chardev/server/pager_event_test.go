package server

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
)

// A client sets up its userfaultfd itself, so it can ask for events the
// protocol never uses. UFFD_FEATURE_EVENT_FORK is the dangerous one: each
// fork of the client queues a message carrying a new userfaultfd that the
// kernel installs in the process that reads it — the daemon. Left open,
// one descriptor leaks per fork, and a client that forks in a loop runs
// the daemon out of descriptors for everyone. The pager closes the
// descriptor a fork event carries, and ends a client that sent any event
// at all: its descriptor is not one the client library made.
func TestAForkEventsDescriptorIsClosedAndTheClientDropped(t *testing.T) {
	var fds [2]int
	require.NoError(t, unix.Pipe2(fds[:], unix.O_CLOEXEC))
	r, w := fds[0], fds[1]
	defer unix.Close(w)
	msg := make([]byte, uffd.MsgSize)
	msg[0] = uffd.EventFork
	binary.LittleEndian.PutUint32(msg[8:], uint32(r)) // uffd_msg.arg.fork.ufd: the descriptor the kernel installed
	dropped := 0
	p := &pager{drop: func(string) { dropped++ }}
	keep := p.serve(msg)
	_, err := unix.Write(w, []byte{1})
	assert.ErrorIs(t, err, syscall.EPIPE, "writing to a pipe whose read end the fork event carried; want EPIPE, the read end closed by the pager")
	if err == nil {
		unix.Close(r)
	}
	assert.False(t, keep, "serve reported a fork event as one to go on serving after")
	assert.Equal(t, 0, dropped, "serve drops nothing itself; the fault loop does, once, when serveReady says stop")
}

// Any other event (remap, remove, unmap) carries no descriptor; the pager
// ends the client all the same, and closes nothing.
func TestAnEventThatIsNotAFaultStopsThePager(t *testing.T) {
	var fds [2]int
	require.NoError(t, unix.Pipe2(fds[:], unix.O_CLOEXEC))
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	msg := make([]byte, uffd.MsgSize)
	msg[0] = 0x15                                          // UFFD_EVENT_REMOVE
	binary.LittleEndian.PutUint32(msg[8:], uint32(fds[0])) // its start address's low half, not a descriptor
	p := &pager{}
	assert.False(t, p.serve(msg), "serve reported a remove event as one to go on serving after")
	_, err := unix.Write(fds[1], []byte{1})
	assert.NoError(t, err, "the pager closed a descriptor number it found in an event that carries none")
}

// One read takes up to 16 messages, and the kernel installs the
// descriptor of every fork event among them as it copies them out. The
// pager stops at the first event, but must close the descriptors of the
// rest too: a client whose forks queue several events at once would
// leak all but the first, per connection, and come back for more.
func TestEveryForkEventOfAReadHasItsDescriptorClosed(t *testing.T) {
	var msgs []byte
	var writers []int
	for range 3 {
		var fds [2]int
		require.NoError(t, unix.Pipe2(fds[:], unix.O_CLOEXEC))
		defer unix.Close(fds[1])
		writers = append(writers, fds[1])
		msg := make([]byte, uffd.MsgSize)
		msg[0] = uffd.EventFork
		binary.LittleEndian.PutUint32(msg[8:], uint32(fds[0]))
		msgs = append(msgs, msg...)
	}
	p := &pager{}
	assert.False(t, p.serveAll(msgs), "serveAll reported a read of fork events as one to go on serving after")
	for k, w := range writers {
		_, err := unix.Write(w, []byte{1})
		assert.ErrorIs(t, err, syscall.EPIPE, "fork event %d of 3: its descriptor, the pipe's read end, is still open", k+1)
	}
}
