package client_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// serve starts a daemon in this process for the rest of the test.
var serve = servetest.Serve

// dial connects a client that is closed when the test ends.
func dial(t testing.TB, s *server.Server) *client.GPU {
	t.Helper()
	g, err := client.Dial(s.Node())
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

// TestAClientFillsAndReadsBack: the whole path once — negotiate, attach,
// open channels, allocate, fill on the device, read back through the
// staging buffer, write and read a pattern — with every byte checked.
func TestAClientFillsAndReadsBack(t *testing.T) {
	s := serve(t, server.Config{})
	g := dial(t, s)
	const size = 3<<20 + 123 // more than the staging buffer, not a whole page
	p, err := g.Alloc(size)
	require.NoError(t, err)
	require.NoError(t, g.Fill(p, size, 0x5a))
	got := make([]byte, size)
	require.NoError(t, g.Read(got, p))
	if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0x5a }); i >= 0 {
		t.Fatalf("byte %d after Fill reads %#x; want 0x5a", i, got[i])
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>13)
	}
	require.NoError(t, g.Write(p, want))
	clear(got)
	require.NoError(t, g.Read(got, p))
	require.Equal(t, want, got, "read back differs from what was written")
	require.NoError(t, g.Free(p))
}

// TestManagedMemoryAcrossTheBoundary: managed memory served to a client.
// The client writes the host side (its mapping of the memfd), the device
// reads it — faulting the pages over — and writes into another managed
// allocation; after Sync the client reads the device's bytes from its own
// mapping. Prefetch and Resident see the pages move; Free gives them back.
func TestManagedMemoryAcrossTheBoundary(t *testing.T) {
	s := serve(t, server.Config{})
	g := dial(t, s)
	const size = 1<<20 + 4096
	src, err := g.AllocManaged(size)
	require.NoError(t, err)
	dst, err := g.AllocManaged(size)
	require.NoError(t, err)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i*13 + i>>12)
	}
	require.NoError(t, g.Copy(dst.Ptr(), src.Ptr(), size))
	if device, _ := dst.Resident(); device == 0 {
		t.Errorf("after the device wrote it, no page of dst is on the device")
	}
	require.NoError(t, dst.Sync())
	require.Equal(t, src.Bytes(), dst.Bytes(), "after Sync the client's mapping of dst differs from what it wrote into src")
	if device, _ := dst.Resident(); device != 0 {
		t.Errorf("after Sync %d pages of dst are still on the device", device)
	}
	mg, err := src.Prefetch(0, size, client.ToHost)
	require.NoError(t, err)
	require.NoError(t, mg.Wait())
	if device, _ := src.Resident(); device != 0 {
		t.Errorf("after Prefetch to the host %d pages of src are on the device", device)
	}
	_, err = src.Prefetch(size, 1, client.ToDevice)
	assert.Error(t, err, "Prefetch past the end succeeded")
	for _, m := range []*client.Managed{src, dst} {
		require.NoError(t, m.Free())
	}
	assert.ErrorIs(t, src.Sync(), uapi.ErrNoEntry, "Sync after Free")
}

// TestClientsOpenAndCloseChannelsAtOnce: two clients opening and closing
// channels as fast as they can never see an error. Before, the daemon
// freed a closed channel's id before giving its pages back, and the other
// client's CHANNEL_OPEN could take the id in between and be refused.
func TestClientsOpenAndCloseChannelsAtOnce(t *testing.T) {
	s := serve(t, server.Config{})
	var wg sync.WaitGroup
	for range 2 {
		g := dial(t, s)
		wg.Go(func() {
			for i := range 150 {
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

// TestAClosedChannelsPendingsReadWhatTheDeviceWrote: a batch submitted on
// a new channel, which is closed at once — before the engine ran it, or
// while it ran. Its Wait may report success only if its fence signalled:
// the closed channel's completions and fence must still read what the
// device last wrote there, not zeroes, which say "command 0 completed,
// StatusOK" and "fence 0".
func TestAClosedChannelsPendingsReadWhatTheDeviceWrote(t *testing.T) {
	s := serve(t, server.Config{})
	g := dial(t, s)
	for r := range 20 {
		ch, err := g.NewChannel(client.Copy, client.ChannelOptions{})
		require.NoError(t, err)
		b := ch.NewBatch()
		b.Delay(uint64(300 * time.Millisecond))
		p, err := b.Submit()
		require.NoError(t, err)
		require.NoError(t, ch.Close())
		if err := p.Wait(); err == nil && !p.Fence().Signaled() {
			t.Fatalf("round %d: the DELAY of a channel closed at once reports success, and its fence has not signalled", r)
		}
	}
}
