package softgpu_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
)

// TestKickAcrossTheBoundary is the stress test of the cross-process kick
// (device/kick.go): a daemon in another process whose engines sleep as
// soon as they find no work (SOFTGPU_IDLE=sleep), and a client here that
// submits one NOP at a time, each right after the last completed, after
// a spin of a random few hundred nanoseconds — so that a doorbell store
// keeps landing around the moment the engine announces its sleep, where a
// kick is lost if the engine does not re-check its doorbells after the
// announcement (or sleeps on a doorbell value it loaded afresh instead of
// the tail it accepted).
//
// A lost kick does not hang the client for ever: the engine's futex sleep
// times out (kickTimeout, a second) and it looks again. So a lost kick is
// a round that takes far longer than a wake-up. The bound, lostBound, is
// a quarter of a second: a wake-up across the boundary costs tens to
// hundreds of microseconds here, and even on a loaded machine a runnable
// thread waits a few scheduler ticks (4 ms each), not 250 ms. A round
// over it counts as lost; the test fails if any is.
func TestKickAcrossTheBoundary(t *testing.T) {
	rounds := 50000
	if testing.Short() {
		rounds = 10000
	}
	const lostBound = 250 * time.Millisecond
	node := filepath.Join(t.TempDir(), "card0")
	d := startRole(t, roleDaemon+"="+node, "SOFTGPU_IDLE=sleep")
	t.Cleanup(func() { d.stop(t) })
	g, err := client.Dial(node)
	require.NoError(t, err)
	defer g.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	kicks := g.Kicks()
	var lost []time.Duration
	for round := range rounds {
		for spin := rng.IntN(512); spin > 0; spin-- {
			sink++ // a few hundred ns at most: the doorbell lands near the engine's sleep
		}
		start := time.Now()
		require.NoError(t, g.Nop(softgpu.Copy), "round %d: Nop", round)
		if took := time.Since(start); took > lostBound {
			lost = append(lost, took)
		}
	}
	kicked := g.Kicks() - kicks
	t.Logf("%d rounds, %d kicks, %d rounds over %v", rounds, kicked, len(lost), lostBound)
	if len(lost) > 0 {
		t.Errorf("%d of %d NOPs took over %v, the first %v: kicks were lost (the engine slept out kickTimeout)", len(lost), rounds, lostBound, lost[0])
	}
	if kicked == 0 {
		t.Errorf("no round kicked the engine: the test did not exercise the kick (is the daemon's engine sleeping?)")
	}
}
