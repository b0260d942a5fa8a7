package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
)

// TestALongCommandHoldsUpNoOtherClientsChannels: one client's command may
// run as long as it likes on its own channel — a DELAY of any number of
// cycles is a valid command, submitted through the ordinary API — but the
// engine must still take a new runlist meanwhile, or every other
// client's CHANNEL_OPEN (and so its Dial), and every channel close and
// teardown, waits for that command to end: a wedge of the whole daemon,
// for as long as the client chose.
func TestALongCommandHoldsUpNoOtherClientsChannels(t *testing.T) {
	s := serve(t, server.Config{})
	a := dial(t, s)
	// The hog: a FILL of a host buffer the test can watch, then a DELAY.
	// Once the FILL's bytes are there, the engine is in the DELAY.
	const hog = 8 * time.Second
	h, err := a.HostAlloc(4096)
	require.NoError(t, err)
	b := a.NewBatch(client.Copy)
	b.Fill(h.Ptr(), 4096, 0xab)
	b.Delay(uint64(hog))
	_, err = b.Submit()
	require.NoError(t, err)
	waitFor(t, "the hog's FILL landing", func() (bool, string) { return h.Bytes()[4095] == 0xab, "" })

	dialed := make(chan error, 1)
	go func() {
		g, err := client.Dial(s.Node())
		if err == nil {
			g.Close()
		}
		dialed <- err
	}()
	// Dial takes milliseconds; three seconds is far more than it ever
	// needs, and far less than the hog's eight.
	select {
	case err := <-dialed:
		require.NoError(t, err, "Dial beside a client running a long DELAY")
	case <-time.After(3 * time.Second):
		t.Errorf("Dial beside a client running a %v DELAY has not returned after 3s: its CHANNEL_OPEN waits for the DELAY to end", hog)
		<-dialed
	}
}
