package client_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
)

// A closed channel's status page and completion ring become private
// copies in the client (hardware.go, unmapChannel), so that it holds
// nothing of the channel's memfds, which the daemon counts against its
// quota until they are gone (server/linger.go). Nothing the client
// submitted is lost by it: a wait after the close reads the copy.

// channelFiles returns the inodes of the channels' memfds this process
// maps: the client's, and the daemon's while it serves a channel (the
// daemon runs in this process).
func channelFiles(t testing.TB) map[string]bool {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err, "reading mappings")
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && strings.Contains(line, "memfd:softgpu-ch") {
			inodes[f[4]] = true
		}
	}
	return inodes
}

// newFiles returns the inodes in now that were not in before.
func newFiles(before, now map[string]bool) []string {
	var files []string
	for ino := range now {
		if !before[ino] {
			files = append(files, ino)
		}
	}
	return files
}

// openWatched opens a copy channel and returns it with the inodes of its
// two memfds, which the process has mapped from then on.
func openWatched(t testing.TB, g *client.GPU, round int) (*client.Channel, []string) {
	t.Helper()
	before := channelFiles(t)
	ch, err := g.NewChannel(client.Copy, client.ChannelOptions{})
	require.NoError(t, err)
	files := newFiles(before, channelFiles(t))
	require.Len(t, files, 2, "round %d: the new channel's memfds, mapped", round)
	return ch, files
}

// stillMapped returns which of files this process still maps.
func stillMapped(t testing.TB, files []string) []string {
	t.Helper()
	now := channelFiles(t)
	var mapped []string
	for _, ino := range files {
		if now[ino] {
			mapped = append(mapped, ino)
		}
	}
	return mapped
}

// TestAWaitAfterCloseGetsItsAnswer: a client submits on a channel, closes
// the channel, and only then waits. A FILL whose fence had signalled
// before the close waits with no error, and its bytes are on the device;
// a DELAY still running at the close, with a waiter started before the
// close (asleep on the fence word by then, or about to be), settles that
// waiter, and a wait after the close settles too, each
// reporting success only if the fence signalled. After each close the
// process maps nothing of the closed channel's files.
func TestAWaitAfterCloseGetsItsAnswer(t *testing.T) {
	s := serve(t, server.Config{})
	g := dial(t, s)
	const size = 64 << 10
	buf, err := g.Alloc(size)
	require.NoError(t, err)

	t.Run("signalled before the close", func(t *testing.T) {
		for r := range 10 {
			ch, files := openWatched(t, g, r)
			value := byte(r + 1)
			p, err := ch.FillAsync(buf, size, value)
			require.NoError(t, err)
			for deadline := time.Now().Add(10 * time.Second); !p.Fence().Signaled(); {
				require.False(t, time.Now().After(deadline), "round %d: the FILL's fence did not signal", r)
				time.Sleep(100 * time.Microsecond)
			}
			require.NoError(t, ch.Close())
			assert.Empty(t, stillMapped(t, files), "round %d: the closed channel's memfds (inodes) still mapped", r)
			require.NoError(t, p.Wait(), "round %d: Wait after Close of a FILL that had completed", r)
			got := make([]byte, size)
			require.NoError(t, g.Read(got, buf))
			require.Equal(t, strings.Repeat(string(value), size), string(got), "round %d: the FILL's bytes", r)
		}
	})

	t.Run("running at the close", func(t *testing.T) {
		for r := range 5 {
			ch, files := openWatched(t, g, r)
			b := ch.NewBatch()
			b.Delay(uint64(200 * time.Millisecond))
			asleep, err := b.Submit()
			require.NoError(t, err)
			b = ch.NewBatch()
			b.Delay(uint64(200 * time.Millisecond))
			after, err := b.Submit()
			require.NoError(t, err)
			settled := make(chan error, 1)
			go func() { settled <- asleep.Wait() }()
			require.NoError(t, ch.Close())
			assert.Empty(t, stillMapped(t, files), "round %d: the closed channel's memfds (inodes) still mapped", r)
			for name, p := range map[string]*client.Pending{"the wait started before the close": asleep, "a wait after the close": after} {
				var err error
				if name == "a wait after the close" {
					err = p.Wait()
				} else {
					select {
					case err = <-settled:
					case <-time.After(10 * time.Second):
						t.Fatalf("round %d: %s did not settle", r, name)
					}
				}
				if err == nil {
					assert.True(t, p.Fence().Signaled(), "round %d: %s reports success, and its fence has not signalled", r, name)
				}
			}
		}
	})
}
