package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
)

// The attack: a stranger takes the device's memory without ALLOC, past
// its memory quota, by opening channels. Each channel the driver opens
// takes an engine-context save area from data memory (driver:
// allocContextSave; RegContextSize, 256 KiB by default), the memory ALLOC
// hands out, but the daemon charges CHANNEL_OPEN one channel and no
// device memory (server: openChannel), and MemoryInUse leaves the areas
// out. So under -client-memory and -uid-memory that share the device out,
// a stranger that allocates nothing opens channels until the device is
// full, and a well-behaved client of another uid is refused memory its
// quota grants it.

func init() {
	strangerRoles["channel-hoard"] = channelHoard
}

// channelHoard opens channels on both engines until one is refused,
// prints how many it holds and the refusal, says "holding", and keeps
// them until killed.
func channelHoard(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	n := 0
	for {
		e := []client.Engine{client.Copy, client.Compute}[n%2]
		_, err := g.NewChannel(e, client.ChannelOptions{Priority: softgpu.PriorityNormal})
		if err != nil {
			fmt.Printf("opened %d channels; then %s\n", n, errnoLine("channel open", err))
			break
		}
		n++
	}
	fmt.Println("holding")
	select {}
}

// TestAStrangersChannelsDoNotTakeAnothersMemoryQuota: device memory is
// shared out 4 MiB a client and a uid; a stranger (uid nobody) allocates
// nothing and opens channels until refused; a well-behaved client then
// allocates 2 MiB, half its quota, of a device the stranger has ALLOCed
// none of.
func TestAStrangersChannelsDoNotTakeAnothersMemoryQuota(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	const quota = 4 << 20
	d := startDaemon(t, "-client-memory", fmt.Sprint(quota), "-uid-memory", fmt.Sprint(quota))
	cred, _ := strangerCred()
	s := startStranger(t, "channel-hoard", d.node, "", cred)
	lines := s.until(t, "holding")
	t.Logf("the stranger: %q", lines)

	g, err := client.Dial(d.node)
	require.NoError(t, err, "the well-behaved client's Dial, the stranger holding its channels")
	t.Cleanup(func() { g.Close() })
	p, err := g.Alloc(2 << 20)
	assert.NoError(t, err, "the well-behaved client's ALLOC of 2 MiB of its %d-byte quota, the stranger holding channels and no ALLOC", quota)
	if err == nil {
		assert.NoError(t, g.Fill(p, 2<<20, 1), "the well-behaved client's FILL")
	}
	s.kill()
	d.stop(t)
}
