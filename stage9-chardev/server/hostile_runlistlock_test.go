package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
)

// The attack: a stranger's call stuck on one engine holds up every other
// client's channels on the other. A SPIN holds the copy engine with no
// preemption point until softgpud's watchdog resets it (about 4 s), and
// a stranger's CHANNEL_OPEN on that engine waits in the daemon for the
// runlist acknowledgement (TestAStuckCallHoldsUpNoOneAndSIGTERMStillStops).
// It waits holding the driver's one runlist lock (driver: runlists.mu),
// which every CHANNEL_OPEN and CHANNEL_CLOSE of every engine takes: so a
// well-behaved client that opens or closes a channel on the compute
// engine, which is not hung and owes no acknowledgement, waits out the
// stranger's hang. The stranger can hang the engine again as soon as it
// is reset.

// TestAStuckCallOnOneEngineHoldsUpNoChannelOfTheOther: while the
// stranger's CHANNEL_OPEN waits on the hung copy engine, a well-behaved
// client dialled before the hang opens and closes a compute channel and
// runs a NOP on it; each must take less than liveBound.
func TestAStuckCallOnOneEngineHoldsUpNoChannelOfTheOther(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	// softgpud's defaults, but no preempt timeout: the stranger's
	// CHANNEL_OPEN asks the SPIN to give way, and a preempt timeout would
	// end the hang in 640 ms, well inside liveBound, so a runlist lock
	// held across it would go unseen. The watchdog resets the engine after
	// about two limits.
	d := startDaemon(t, "-preempt-timeout", "0")
	w := dialWellBehaved(t, d.node)
	cred, _ := strangerCred()
	s := startStranger(t, "stuck-open", d.node, "", cred) // hostile_stuck_test.go
	s.until(t, "ready")

	hog := dialRaw(t, d.node)
	hog.attach()
	ch := hog.openChannel(abi.EngineCopy)
	nop := ch.put(abi.Command{Op: abi.OpNop, Ctx: hog.ctx})
	ch.put(abi.Command{Op: abi.OpSpin, Ctx: hog.ctx, Value: 1 << 62})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(nop), "the NOP before the SPIN")
	hung := time.Now()

	ctl := control(t, d.node)
	before := callsMade(t, ctl)
	fmt.Fprintln(s.stdin, "go")
	s.until(t, "calling")
	waitFor(t, "the daemon receiving the stranger's CHANNEL_OPEN", func() (bool, string) {
		n := callsMade(t, ctl)
		return n > before+1, fmt.Sprintf("%d calls; %d before", n, before)
	})
	time.Sleep(50 * time.Millisecond) // the call reaches the driver

	start := time.Now()
	cc, err := w.g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityNormal})
	opened := time.Since(start)
	require.NoError(t, err, "the well-behaved client's CHANNEL_OPEN on the compute engine")
	start = time.Now()
	assert.NoError(t, cc.Nop(), "a NOP on the well-behaved client's new compute channel")
	ran := time.Since(start)
	start = time.Now()
	assert.NoError(t, cc.Close(), "the well-behaved client's CHANNEL_CLOSE on the compute engine")
	closed := time.Since(start)
	t.Logf("the copy engine hung %v ago; the well-behaved client's compute channel: opened in %v, NOP in %v, closed in %v",
		time.Since(hung), opened, ran, closed)
	assert.Less(t, opened, liveBound, "the well-behaved client's CHANNEL_OPEN on the compute engine waited for the stranger's call stuck on the copy engine")
	assert.Less(t, closed, liveBound, "the well-behaved client's CHANNEL_CLOSE on the compute engine waited for the stranger's call stuck on the copy engine")
	d.stop(t)
	for _, line := range s.findings(t) {
		t.Logf("the stranger: %s", line)
	}
}
