package server_test

// Freed memory and other clients' queued work: the daemon's driver
// defers a free until the commands that could name the memory have run
// (driver/deferred.go), and a stranger's commands cannot name another
// client's memory, so its queued work must not hold their frees back.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

func init() {
	strangerRoles["rt-delays"] = rtDelays
}

// rtQueueDelays queues n DELAYs of 1.5 s on each engine: each ends well
// inside the default 2 s watchdog, so nothing is faulted.
func rtQueueDelays(g *client.GPU, n int) error {
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := g.NewBatch(e)
		for range n {
			b.Delay(1_500_000_000)
		}
		if _, err := b.Submit(); err != nil {
			return err
		}
	}
	return nil
}

// rtDelays: a stranger that allocates nothing; it only keeps DELAYs
// queued on its own two channels, and holds until its stdin line.
func rtDelays(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	if err := rtQueueDelays(g, 100); err != nil {
		return err
	}
	fmt.Println("ready")
	return waitLine()
}

// TestAStrangersQueuedWorkDoesNotHoldAnothersFreedMemory: a victim that
// allocates and frees one 1 MiB buffer again and again, well inside its
// quota, must keep getting it while a stranger's channels have work
// queued. A FREE waits only for the channels that could name the memory
// (driver/deferred.go, queuedWorkOf); when it waited for every channel on
// the device, the stranger's too, the victim's 13th ALLOC on a 16 MiB
// device failed with ErrNoMemory.
func TestAStrangersQueuedWorkDoesNotHoldAnothersFreedMemory(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-delays", d.node, "", cred)
	s.until(t, "ready")
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	for i := range 50 {
		p, err := g.Alloc(1 << 20)
		require.NoError(t, err, "the victim's ALLOC %d of 1 MiB (each freed before the next), a stranger's DELAYs queued", i+1)
		require.NoError(t, g.Free(p))
	}
	s.kill()
	d.stop(t)
}
