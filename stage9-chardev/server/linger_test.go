package server

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/uapi"
)

// lingerRig is a linger with no goroutine reading it, a client of uid 7
// holding one channel, and that channel's two files.
func lingerRig(t *testing.T) (*linger, *client, device.ChannelFiles) {
	t.Helper()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), uidUse: map[uint32]*uapi.Pools{}, orphaned: map[uint32]uint32{},
		clientLimit: uapi.Pools{Channels: 4}, uidLimit: uapi.Pools{Channels: 4}}
	l, err := openLinger(s)
	require.NoError(t, err)
	t.Cleanup(func() { go l.lingerLoop(); l.close() })
	s.linger = l
	c := &client{s: s, uid: 7}
	require.NoError(t, c.charge(uapi.Pools{Channels: 1}))
	var files device.ChannelFiles
	for _, f := range []**os.File{&files.User, &files.Status} {
		fd, err := unix.MemfdCreate("linger-test", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		*f = os.NewFile(uintptr(fd), "linger-test")
	}
	return l, c, files
}

// channels is the Channels charge of c and of its uid.
func channels(c *client) (client, uid uint32) {
	c.s.quotaMu.Lock()
	defer c.s.quotaMu.Unlock()
	if u := c.s.uidUse[c.uid]; u != nil {
		uid = u.Channels
	}
	return c.use.Channels, uid
}

// TestAClosedChannelIsRefundedWhenItsFilesGo: the charge stays while
// either file lives, whichever of the close and the files' end comes
// first; once the client has gone it is its uid's alone, until the last
// file goes.
func TestAClosedChannelIsRefundedWhenItsFilesGo(t *testing.T) {
	l, c, files := lingerRig(t)
	h, err := l.watch(c, files)
	require.NoError(t, err)
	l.closed(h)
	files.User.Close()
	l.drain()
	got, uid := channels(c)
	require.Equal(t, [2]uint32{1, 1}, [2]uint32{got, uid}, "closed, the status file still open: the client's and uid's Channels")

	l.orphan(c) // the client goes
	got, uid = channels(c)
	require.Equal(t, [2]uint32{0, 1}, [2]uint32{got, uid}, "its client gone: the client's and uid's Channels")

	files.Status.Close()
	l.drain()
	got, uid = channels(c)
	require.Equal(t, [2]uint32{0, 0}, [2]uint32{got, uid}, "both files gone: the client's and uid's Channels")
	require.Empty(t, l.s.uidUse, "the uid's use once it holds nothing")
	require.Empty(t, l.s.orphaned, "the orphaned channels once they are refunded")
}

// TestAnOverflowedQueueIsReconciledFromTheWatchesLeft: when events were
// dropped (a queue past max_queued_events), the watches the kernel still
// lists say which files are gone; the events read afterwards refund
// nothing twice (a refund of more than the client holds panics).
func TestAnOverflowedQueueIsReconciledFromTheWatchesLeft(t *testing.T) {
	l, c, files := lingerRig(t)
	h, err := l.watch(c, files)
	require.NoError(t, err)
	l.closed(h)
	// A second closed channel whose files stay open: the reconcile must
	// leave it charged.
	require.NoError(t, c.charge(uapi.Pools{Channels: 1}))
	var kept device.ChannelFiles
	for _, f := range []**os.File{&kept.User, &kept.Status} {
		fd, err := unix.MemfdCreate("linger-test-kept", unix.MFD_CLOEXEC)
		require.NoError(t, err)
		*f = os.NewFile(uintptr(fd), "linger-test-kept")
		defer (*f).Close()
	}
	hk, err := l.watch(c, kept)
	require.NoError(t, err)
	l.closed(hk)
	files.User.Close()
	files.Status.Close() // both watches end; their events wait unread, as if dropped
	l.mu.Lock()
	l.reconcileLocked()
	l.mu.Unlock()
	got, _ := channels(c)
	require.Equal(t, uint32(1), got, "the client's Channels after the reconcile: the channel whose files are open")
	l.drain()
	got, _ = channels(c)
	require.Equal(t, uint32(1), got, "the client's Channels after the events")
}
