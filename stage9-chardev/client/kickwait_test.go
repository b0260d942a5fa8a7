package client

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
)

// TestAKickedWaitSleepsAndIsWoken is the stress test of a wait that
// blocks at once after its doorbell kicked the engine
// (driver/kickwait.go): engines that sleep as soon as they find no work,
// and NOPs submitted one at a time, each after a spin of a random few
// hundred nanoseconds, so that kicks land all around the engine's sleep
// and the waiter arms its fence while the engine is asleep, waking, or
// already running the NOP. Each such wait sleeps on the fence word, and
// the engine's fence vector must wake it: a wake lost between the arm and
// the sleep ends the sleep only at its timeout, which is counted
// (SleepTimeouts) and must stay zero. The timeout is a second, far beyond
// any wake-up, so a count is a lost wake and not a slow machine; a lost
// kick shows as a NOP that took the engine's kickTimeout (a second), held
// under lostBound. And the path must have been taken: every kicked NOP's
// wait must have blocked at once (KickedBlocks); many of them then find
// their fence already there as they arm, and do not sleep.
func TestAKickedWaitSleepsAndIsWoken(t *testing.T) {
	rounds := 20000
	if testing.Short() {
		rounds = 4000
	}
	const lostBound = 250 * time.Millisecond
	cfg := server.Config{}
	cfg.Driver.Idle = driver.Idle{Mode: driver.IdleSleep}
	s := servetest.Serve(t, cfg)
	g, err := DialConfig(Config{Node: s.Node(), SleepTimeout: time.Second})
	require.NoError(t, err)
	defer g.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	kicks, before := g.Kicks(), g.cl.Stats()
	var slow []time.Duration
	var sink int
	for round := range rounds {
		for spin := rng.IntN(512); spin > 0; spin-- {
			sink++
		}
		start := time.Now()
		require.NoError(t, g.Nop(Copy), "round %d", round)
		if took := time.Since(start); took > lostBound {
			slow = append(slow, took)
		}
	}
	st := g.cl.Stats()
	kicked, slept := g.Kicks()-kicks, st.Wakeups-before.Wakeups
	blocked := st.KickedBlocks - before.KickedBlocks
	t.Logf("%d rounds (%d spins), %d kicks, %d waits blocked at once, %d sleeps, %d sleeps timed out, %d rounds over %v",
		rounds, sink, kicked, blocked, slept, st.SleepTimeouts-before.SleepTimeouts, len(slow), lostBound)
	require.Zero(t, st.SleepTimeouts-before.SleepTimeouts, "sleeps ended by their one-second timeout, not by the engine's wake: fence wakes were lost")
	require.Empty(t, slow, "NOPs that took over %v: kicks were lost (the engine slept out kickTimeout)", lostBound)
	require.NotZero(t, kicked, "no round kicked the engine: the test did not exercise the kick")
	require.Equal(t, kicked, blocked, "of %d kicked waits %d blocked at once: a kicked wait polled instead", kicked, blocked)
	require.NotZero(t, slept, "no kicked wait slept on its fence word: the test did not exercise the engine's wake of it")
}
