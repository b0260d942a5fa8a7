package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
)

// A client whose call is stuck never holds up another client, and
// SIGTERM still stops the daemon with the call in flight (issue 32,
// items 3 and 6). A SPIN holds the copy engine with no preemption point,
// so the engine gives no runlist acknowledgement until softgpud's default
// watchdog resets it (one limit to ask it to stop, which a SPIN never
// hears, and a limit more: about 4 s). A stranger, a process of its own
// and another uid, calls CHANNEL_OPEN on that engine then: its call waits
// in the daemon for the acknowledgement. While it waits, a well-behaved
// client — dialled before the hang, since a Dial opens a channel on every
// engine — makes control calls of its own and runs work on the other
// engine, within liveBound and with its bytes right; and SIGTERM, sent
// while the stranger's call still waits, stops softgpud cleanly within
// stopBound.

func init() {
	strangerRoles["stuck-open"] = stuckOpen
}

// stuckOpen is the "stuck-open" role: it dials, says "ready", and on the
// test's line says "calling" and opens a copy channel; then it reports
// the call's outcome, and "done".
func stuckOpen(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	fmt.Println("ready")
	if err := waitLine(); err != nil {
		return err
	}
	fmt.Println("calling")
	ch, err := g.NewChannel(client.Copy, client.ChannelOptions{Priority: softgpu.PriorityNormal})
	fmt.Println(errnoLine("channel open", err))
	if err == nil {
		ch.Close()
	}
	fmt.Println("done")
	return nil
}

func TestAStuckCallHoldsUpNoOneAndSIGTERMStillStops(t *testing.T) {
	// softgpud's defaults, but no preempt timeout: the stranger's
	// CHANNEL_OPEN asks the SPIN to give way, and a preempt timeout would
	// unstick the call in 640 ms, before SIGTERM. The watchdog resets the
	// engine after about two limits.
	d := startDaemon(t, "-preempt-timeout", "0")
	d.live(t, "before the hang")
	w := dialWellBehaved(t, d.node)
	cred, _ := strangerCred()
	s := startStranger(t, "stuck-open", d.node, "", cred)
	s.until(t, "ready")

	hog := dialRaw(t, d.node)
	hog.attach()
	ch := hog.openChannel(abi.EngineCopy)
	nop := ch.put(abi.Command{Op: abi.OpNop, Ctx: hog.ctx})
	spin := ch.put(abi.Command{Op: abi.OpSpin, Ctx: hog.ctx, Value: 1 << 62})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(nop), "the NOP before the SPIN")
	hung := time.Now() // the copy engine runs the SPIN from here on

	ctl := control(t, d.node)
	before := callsMade(t, ctl)
	fmt.Fprintln(s.stdin, "go")
	s.until(t, "calling")
	waitFor(t, "the daemon receiving the stranger's CHANNEL_OPEN", func() (bool, string) {
		n := callsMade(t, ctl)
		return n > before+1, fmt.Sprintf("%d calls; %d before", n, before) // +1: the CLIENT_INFO itself
	})

	// The well-behaved client while the stranger's call waits: control
	// calls, and work on the engine that is not hung, its bytes checked.
	for i := range 3 {
		start := time.Now()
		p, err := w.g.Alloc(64 << 10)
		require.NoError(t, err, "the well-behaved client's Alloc %d, the stranger's call stuck", i)
		require.NoError(t, w.g.Free(p), "the well-behaved client's Free %d, the stranger's call stuck", i)
		before := w.host.Bytes()[0]
		require.NoError(t, w.g.Add32(w.host.Ptr(), 4096, 1), "the well-behaved client's ADD on the compute engine %d, the stranger's call stuck", i)
		if got := w.host.Bytes()[0]; got != before+1 {
			t.Errorf("the well-behaved client's ADD %d on the compute engine: byte 0 reads %#x; want %#x", i, got, before+1)
		}
		if took := time.Since(start); took > liveBound {
			t.Errorf("the well-behaved client's calls and ADD %d, the stranger's call stuck, took %v; want under %v", i, took, liveBound)
		}
	}
	select {
	case line := <-s.lines:
		if done, st := ch.completion(spin); done {
			t.Fatalf("the stranger's CHANNEL_OPEN returned (%q) before SIGTERM, and the SPIN it waited behind ended %v after it began (%v): the test needs the call stuck — a daemon without SPIN, or a machine too slow to tell",
				line, time.Since(hung), st)
		}
		t.Fatalf("the stranger's CHANNEL_OPEN on an engine hung in a SPIN returned (%q) before SIGTERM, %v after the SPIN began: the daemon did not wait for the engine's runlist acknowledgement",
			line, time.Since(hung))
	default:
	}

	took := d.stop(t)
	t.Logf("softgpud exited 0 %v after SIGTERM, the stranger's CHANNEL_OPEN in flight", took)
	// The stranger's call returns once the daemon is gone, whatever it
	// answered: it is not left waiting.
	for _, line := range s.findings(t) {
		t.Logf("the stranger: %s", line)
	}
}
