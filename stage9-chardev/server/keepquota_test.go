package server_test

import (
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// A closed channel counts against the Channels quota until every
// descriptor and mapping of its two memfds is gone (linger.go). These
// tests hold both sides of that: a client that keeps them is refused at
// its quota and gets its channels back as it lets go, even after its
// connection has gone; a client that lets go — the client library does,
// at Close — is never refused for channels it closed.

// syncLog is a log the daemon's goroutines write.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// keeper is a raw client that opens and closes channels and keeps the
// descriptors CHANNEL_OPEN gave it until it lets go of them.
type keeper struct {
	t    *testing.T
	sock *net.UnixConn
	kept [][]int // each closed channel's descriptors, oldest first
	fds  []int   // ATTACH's
}

// dialKeeper attaches a keeper; what it still holds is closed when the
// test ends.
func dialKeeper(t *testing.T, node string) *keeper {
	t.Helper()
	sock, _, fds, err := strangerAttach(node)
	require.NoError(t, err, "attaching")
	k := &keeper{t: t, sock: sock, fds: fds}
	t.Cleanup(func() {
		k.hangUp()
		k.letGo(len(k.kept))
	})
	return k
}

// open opens a channel, keeping its descriptors, and returns its id.
func (k *keeper) open() (uint32, error) {
	open := uapi.ChannelOpen{Engine: 0}
	fds, err := strangerCall(k.sock, &open)
	if err != nil {
		return 0, err
	}
	k.kept = append(k.kept, fds)
	return open.Channel, nil
}

// close closes channel id.
func (k *keeper) close(id uint32) {
	k.t.Helper()
	_, err := strangerCall(k.sock, &uapi.ChannelClose{Channel: id})
	require.NoError(k.t, err, "CHANNEL_CLOSE of %d", id)
}

// cycle opens a channel and closes it, keeping its descriptors.
func (k *keeper) cycle() error {
	id, err := k.open()
	if err == nil {
		k.close(id)
	}
	return err
}

// letGo closes the descriptors of the n oldest channels kept.
func (k *keeper) letGo(n int) {
	for _, fds := range k.kept[:n] {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	k.kept = k.kept[n:]
}

// hangUp closes the connection (and ATTACH's descriptors), keeping the
// channels' descriptors.
func (k *keeper) hangUp() {
	if k.sock == nil {
		return
	}
	k.sock.Close()
	for _, fd := range k.fds {
		unix.Close(fd)
	}
	k.sock, k.fds = nil, nil
}

// TestAClientKeepingClosedChannelsFilesIsRefusedAtItsQuota: with 4
// channels a client and 6 a uid, a client that keeps every closed
// channel's descriptors is refused its fifth CHANNEL_OPEN with ErrQuota,
// and the refusal (in the daemon's log) names the quota and says the
// channels it counts are closed ones; as it lets go of one, it gets one
// back at once, and from then on opens and closes as often as it likes
// if it lets go each time. A client that hangs up keeping them leaves
// them charged to its uid: another client of the uid gets only what the
// uid's quota leaves, until they are let go.
func TestAClientKeepingClosedChannelsFilesIsRefusedAtItsQuota(t *testing.T) {
	var log syncLog
	s := serve(t, server.Config{ClientQuota: server.Quota{Channels: 4}, UidQuota: server.Quota{Channels: 6},
		Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctl := control(t, s.Node())

	k := dialKeeper(t, s.Node())
	for i := range 4 {
		require.NoError(t, k.cycle(), "open and close %d, keeping the descriptors", i)
	}
	_, err := k.open()
	require.ErrorIs(t, err, uapi.ErrQuota, "a fifth CHANNEL_OPEN of a client keeping 4 closed channels' files")
	assert.Contains(t, log.String(), "the client holds 4 channels of its quota of 4", "the refusal, in the daemon's log")
	assert.Contains(t, log.String(), "4 of them closed", "the refusal, in the daemon's log")

	k.letGo(1)
	for i := range 20 {
		require.NoError(t, k.cycle(), "open and close %d, after letting go of one closed channel's files", i)
		k.letGo(len(k.kept) - 3) // the one just closed: three are still kept
	}
	k.letGo(len(k.kept))
	ids := make([]uint32, 4)
	for i := range ids {
		ids[i], err = k.open()
		require.NoError(t, err, "open %d of 4, every closed channel let go", i)
	}
	for _, id := range ids {
		k.close(id)
	}
	k.letGo(len(k.kept))

	gone := dialKeeper(t, s.Node())
	for i := range 4 {
		require.NoError(t, gone.cycle(), "open and close %d by a client that will hang up", i)
	}
	gone.hangUp()
	waitClients(t, ctl, 2) // k and ctl
	other := dialKeeper(t, s.Node())
	for i := range 2 {
		_, err := other.open()
		require.NoError(t, err, "open %d of 2 by another client of the uid", i)
	}
	_, err = other.open()
	require.ErrorIs(t, err, uapi.ErrQuota, "a third open, the uid's 6 taken by 4 closed channels of a client gone and 2 open")
	assert.Contains(t, log.String(), "hold 6 channels of its quota of 6", "the uid's refusal, in the daemon's log")
	gone.letGo(len(gone.kept))
	for i := range 2 {
		_, err := other.open()
		require.NoError(t, err, "open %d of 2 more, the gone client's files let go", i)
	}
}

// TestAClientThatLetsGoIsNeverRefusedForChannelsItClosed: with a quota of
// 4 channels a client — its own two and two more — two goroutines of the
// client library each open, use and close a channel 100 times. The
// library lets go of a channel's files at Close, so no open is refused.
func TestAClientThatLetsGoIsNeverRefusedForChannelsItClosed(t *testing.T) {
	s := serve(t, server.Config{ClientQuota: server.Quota{Channels: 4}})
	g := dial(t, s)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range 100 {
				ch, err := g.NewChannel(client.Copy, client.ChannelOptions{})
				if !assert.NoError(t, err, "open %d", i) {
					return
				}
				assert.NoError(t, ch.Nop(), "NOP on channel %d", i)
				if !assert.NoError(t, ch.Close(), "close %d", i) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestTheLingerLoopEndsWithTheDaemon: the goroutine that reads the
// daemon's inotify instance is gone once Close has returned.
func TestTheLingerLoopEndsWithTheDaemon(t *testing.T) {
	s, err := server.New(server.Config{Node: t.TempDir() + "/card0", Device: deviceConfig(16 << 20), Log: quiet()})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	g, err := client.Dial(s.Node())
	require.NoError(t, err)
	ch, err := g.NewChannel(client.Copy, client.ChannelOptions{})
	require.NoError(t, err)
	require.NoError(t, ch.Close())
	require.NoError(t, g.Close())
	require.NoError(t, s.Close())
	require.NoError(t, <-done)
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	require.NotContains(t, stacks, "lingerLoop", "a goroutine after the daemon closed")
}
