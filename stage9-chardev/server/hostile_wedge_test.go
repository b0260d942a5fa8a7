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

// Item 6 of the threat model: no call blocks the daemon, and no command
// holds an engine for good. A DELAY of 2^62 cycles is a valid command;
// softgpud's default watchdog stops it and faults its channel, while
// every other client's channels on the same engines keep their latency.

func TestANeverEndingCommandIsStoppedAndOthersKeepTheirLatency(t *testing.T) {
	d := startDaemon(t) // softgpud's defaults, its watchdog among them
	hog, err := client.Dial(d.node)
	require.NoError(t, err)
	defer hog.Close()
	var pending []interface{ Wait() error }
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := hog.NewBatch(e)
		b.Delay(1 << 62)
		p, err := b.Submit()
		require.NoError(t, err)
		pending = append(pending, p)
	}
	d.live(t, "while a DELAY of 2^62 cycles runs on each engine")
	for i, p := range pending {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			assert.Error(t, err, "the hog's DELAY of 2^62 cycles on engine %d completed without error", i)
		case <-time.After(patience):
			t.Fatalf("the hog's DELAY of 2^62 cycles on engine %d still runs after %v: softgpud has no watchdog", i, patience)
		}
	}
	d.live(t, "after the hog's channels were faulted")
	d.stop(t)
}

// TestAHungEngineIsResetByTheDefaultWatchdog: a SPIN never reaches a
// preemption point, so no timeslice takes its engine back; softgpud's
// default watchdog (2 s) asks it to stop at 2 s, which it cannot, and
// resets the engine a limit later (device/watchdog.go), so the SPIN ends
// about 4 s after it began. The reset faults the SPIN's channel, while
// another client's round trips on the other engine keep their latency,
// and on the hung one come back once it is reset.
func TestAHungEngineIsResetByTheDefaultWatchdog(t *testing.T) {
	d := startDaemon(t)             // softgpud's defaults, its watchdog among them
	w := dialWellBehaved(t, d.node) // dialled before the hang: a Dial needs every engine's runlist ack
	hog := dialRaw(t, d.node)
	hog.attach()
	ch := hog.openChannel(abi.EngineCopy)
	nop := ch.put(abi.Command{Op: abi.OpNop, Ctx: hog.ctx})
	spin := ch.put(abi.Command{Op: abi.OpSpin, Ctx: hog.ctx, Value: 1 << 62})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(nop), "the NOP before the SPIN")
	start := time.Now()
	for i := range 3 {
		t0 := time.Now()
		require.NoError(t, w.g.Nop(client.Compute), "the well-behaved client's NOP %d on the compute engine, the copy engine hung", i)
		if took := time.Since(t0); took > liveBound {
			t.Errorf("the well-behaved client's NOP %d on the compute engine, the copy engine hung, took %v; want under %v", i, took, liveBound)
		}
	}
	if st := ch.wait(spin); st != abi.StatusTimeout {
		t.Errorf("a SPIN of 2^62 cycles ended %v; want %v", st, abi.StatusTimeout)
	}
	// The engine completes the SPIN with StatusTimeout and then faults its
	// channel (device/sched.go, hang): a reader that has seen the
	// completion can look before the fault is stored, and on a busy
	// machine it did. So the fault is waited for, within patience.
	f := ch.fault()
	for deadline := time.Now().Add(patience); f == abi.FaultNone && time.Now().Before(deadline); f = ch.fault() {
		time.Sleep(time.Millisecond)
	}
	t.Logf("the SPIN stopped %v after it began (watchdog 2 s: asked to stop at 2 s, reset a limit later); its channel: %v", time.Since(start), f)
	if f == abi.FaultNone {
		t.Errorf("the SPIN's channel, %v after the watchdog stopped it: no fault", patience)
	}
	w.roundTrip(t, "after the copy engine's reset", 7)
	d.live(t, "after the copy engine's reset")
	d.stop(t)
}

// TestAFullWindowWaitsOnlyForItsOwnersChannels: a stranger runs a DELAY
// that never ends (no watchdog) on both engines. A victim fills the DMA
// window with its own host memory, frees a region and registers another.
// The freed entry retires once the commands that could name it have run
// — the victim's, none queued — not the stranger's, which never will;
// and were it to wait on anything that does not end, the call would fail
// rather than spin.
func TestAFullWindowWaitsOnlyForItsOwnersChannels(t *testing.T) {
	d := startDaemon(t, "-watchdog", "0")
	hog, err := client.Dial(d.node)
	require.NoError(t, err)
	defer hog.Close()
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := hog.NewBatch(e)
		b.Delay(1 << 62)
		_, err := b.Submit()
		require.NoError(t, err)
	}
	v, err := client.Dial(d.node)
	require.NoError(t, err)
	defer v.Close()
	var held []*client.HostBuffer
	for range 200 {
		h, err := v.HostAlloc(4096)
		if err != nil {
			break // the window is full (or the victim's regions are)
		}
		held = append(held, h)
	}
	if len(held) == 0 {
		t.Fatal("the victim could register no host memory")
	}
	require.NoError(t, v.HostFree(held[0]))
	done := make(chan error, 1)
	go func() {
		h, err := v.HostAlloc(4096)
		if err == nil {
			h.Bytes()[0] = 1
		}
		done <- err
	}()
	select {
	case err := <-done:
		assert.NoError(t, err, "HOST_REGISTER after freeing one of %d regions, the stranger's DELAY running; want the freed entry back", len(held))
	case <-time.After(liveBound):
		t.Fatalf("HOST_REGISTER after freeing one of %d regions has not returned after %v: it waits on the stranger's never-ending DELAY", len(held), liveBound)
	}
	// The victim gives the window back (that one client can hold every
	// entry is the window quota's business, not this test's), and a
	// well-behaved client still gets through beside the stranger. The
	// daemon tears a client down after its connection closes; until it
	// has, the victim's entries still count against its uid's window
	// quota, which the well-behaved client (the same uid) shares — so
	// wait for the teardown first (seen: "over quota" under load).
	// Wait for the victim's own context to leave the list, not for a
	// count to drop: a count taken here may still include startDaemon's
	// probe, whose teardown would satisfy it with the victim still listed.
	ctl := control(t, d.node)
	victim := uint32(v.Context())
	v.Close()
	waitNoClientWithContext(t, ctl, victim)
	d.live(t, "with the stranger's DELAY running")
	d.stop(t)
}

// TestSIGTERMStopsTheDaemonWithACallInFlight: SIGTERM while a client's
// call waits on the device — a HOST_REGISTER with the window full of
// entries retiring behind a stranger's never-ending DELAY — must stop
// softgpud promptly and cleanly: every wait of the daemon's driver on
// what a client controls has a bound, so Close is never left waiting
// for a call that cannot return.
func TestSIGTERMStopsTheDaemonWithACallInFlight(t *testing.T) {
	d := startDaemon(t, "-watchdog", "0")
	d.live(t, "before the stranger fills the window") // once it has, the uid's window quota, which the probe shares, is spent
	hog, err := client.Dial(d.node)
	require.NoError(t, err)
	defer hog.Close()
	var held []*client.HostBuffer
	for range 200 {
		h, err := hog.HostAlloc(4096)
		if err != nil {
			break
		}
		held = append(held, h)
	}
	// The stranger's own entries retire behind its own DELAYs: its
	// HOST_REGISTER after a free waits on a command that never ends.
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := hog.NewBatch(e)
		b.Fill(held[len(held)-1].Ptr(), 4096, 1)
		b.Delay(1 << 62)
		_, err := b.Submit()
		require.NoError(t, err)
	}
	b := hog.NewBatch(client.Copy)
	b.Fill(held[0].Ptr(), 4096, 2) // queued behind the DELAY: it names the entry freed next
	_, err = b.Submit()
	require.NoError(t, err)
	require.NoError(t, hog.HostFree(held[0]))
	ctl := control(t, d.node)
	calls := func() uint64 { return callsMade(t, ctl) }
	before := calls()
	go hog.HostAlloc(4096) // the call in flight when SIGTERM comes
	waitFor(t, "the daemon receiving the HOST_REGISTER", func() (bool, string) {
		n := calls()
		return n > before+1, fmt.Sprintf("%d calls; %d before", n, before) // +1: the CLIENT_INFO itself
	})
	// SIGTERM: a clean exit, well within softgpud's 10 s shutdown bound.
	d.stop(t)
}

// TestSIGTERMStopsTheDaemonWithAHungEngine: an engine hung in a command
// with no preemption point (SPIN, and no watchdog to reset it), a
// client mid-call on that engine (CHANNEL_OPEN and CHANNEL_CLOSE need
// the engine's runlist ack, which a hung engine never gives: the
// driver's bound ends that wait) and another waiting for a fence behind
// the SPIN. SIGTERM must still stop softgpud within its stated bound,
// measured here, and cleanly.
func TestSIGTERMStopsTheDaemonWithAHungEngine(t *testing.T) {
	d := startDaemon(t, "-watchdog", "0")
	d.live(t, "before the hang")
	// Every client dials before the hang: a Dial opens channels, and a
	// hung engine answers no runlist.
	waiter, err := client.Dial(d.node)
	require.NoError(t, err)
	defer waiter.Close()
	caller, err := client.Dial(d.node)
	require.NoError(t, err)
	defer caller.Close()
	hog := dialRaw(t, d.node)
	hog.attach()
	ch := hog.openChannel(abi.EngineCopy)
	nop := ch.put(abi.Command{Op: abi.OpNop, Ctx: hog.ctx})
	ch.put(abi.Command{Op: abi.OpSpin, Ctx: hog.ctx, Value: 1 << 62})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(nop), "the NOP before the SPIN")
	// The engine runs the SPIN from here on.
	fenced := make(chan error, 1)
	go func() { fenced <- waiter.Nop(client.Copy) }() // behind the SPIN's engine: it waits
	ctl := control(t, d.node)
	calls := func() uint64 { return callsMade(t, ctl) }
	before := calls()
	inCall := make(chan error, 1)
	go func() {
		ch, err := caller.NewChannel(client.Copy, client.ChannelOptions{Priority: softgpu.PriorityNormal})
		if err == nil {
			err = ch.Close()
		}
		inCall <- err
	}()
	waitFor(t, "the daemon receiving the CHANNEL_OPEN", func() (bool, string) {
		n := calls()
		return n > before+1, fmt.Sprintf("%d calls; %d before", n, before) // +1: the CLIENT_INFO itself
	})
	select {
	case err := <-fenced:
		t.Fatalf("a NOP on the copy engine, hung in a SPIN, completed: %v", err)
	default:
	}
	took := d.stop(t)
	t.Logf("softgpud exited 0 %v after SIGTERM, an engine hung and a call in flight", took)
	for _, c := range []struct {
		what string
		done chan error
	}{{"the NOP behind the SPIN", fenced}, {"the CHANNEL_OPEN in flight", inCall}} {
		select {
		case err := <-c.done:
			assert.Error(t, err, "%s succeeded; the engine never ran it", c.what)
		case <-time.After(patience):
			t.Errorf("%s still waits %v after softgpud exited", c.what, patience)
		}
	}
}

// callsMade is how many calls the daemon has received from all its
// clients (CLIENT_INFO, itself one of them).
func callsMade(t *testing.T, ctl *client.Control) uint64 {
	t.Helper()
	cs, err := ctl.Clients()
	require.NoError(t, err)
	var n uint64
	for _, c := range cs {
		n += c.Calls
	}
	return n
}
