package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// A channel id that changes hands starts clean (issue 32, item 4): when a
// channel leaves its runlist, the daemon itself — not the engine, whose
// reset runs only for a channel it saw fault — puts the channel's status
// page and completion ring in a state it chooses: no fault, the fence at
// the head, the counters at zero, and every completion entry saying
// "below the head: done; at or above it: not yet". So the next owner
// inherits no completion, no fault, no stale lap and nothing of how its
// predecessor's work went (when its fences landed, how many interrupts it
// raised).

func init() {
	strangerRoles["dirty-channels"] = dirtyChannels
}

// dirtyChannels leaves every trace it can on its two channels — fences
// waited for by sleeping (interrupts), then a fault on each — and exits.
func dirtyChannels(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		for range 3 {
			// 5 ms: longer than any poll budget, so the wait sleeps and
			// the fence raises an interrupt.
			if err := g.Delay(e, uint64(5*time.Millisecond)); err != nil {
				return fmt.Errorf("%v: Delay: %w", e, err)
			}
		}
	}
	fmt.Println(errnoLine("fault copy", g.Fill(client.Ptr(0xdead_0000), 4096, 1)))
	fmt.Println(errnoLine("fault compute", g.Sum32(client.Ptr(0xdead_0000), client.Ptr(0xbeef_0000), 4096)))
	fmt.Println("done")
	return nil
}

func TestAChannelThatChangesHandsStartsClean(t *testing.T) {
	d := startDaemon(t)
	w := dialWellBehaved(t, d.node) // channels 2 and 3
	w.roundTrip(t, "before", 1)
	cred, _ := strangerCred()
	for _, line := range startStranger(t, "dirty-channels", d.node, "", cred).findings(t) {
		t.Logf("the stranger: %s", line)
	}
	w.roundTrip(t, "after the stranger", 2)
	ctl := control(t, d.node)
	waitClients(t, ctl, 2) // the well-behaved client and ctl: the stranger is gone

	next := dialRaw(t, d.node)
	next.attach()
	for e := range abi.Engine(abi.NumEngines) {
		ch := next.openChannel(e)
		require.Equal(t, 2*abi.Channel(abi.NumEngines)+abi.Channel(e), ch.id, "the next owner's %v channel is %v, the stranger's", e, ch.id)
		status := func(off uint64) uint64 { return word(ch.status, uapi.StatusPageOffset+off).Load() }
		for _, r := range []struct {
			name      string
			off, want uint64
		}{
			{"RegChannelFault", abi.RegChannelFault, uint64(abi.FaultNone)},
			{"RegChannelFaultValue", abi.RegChannelFaultValue, 0},
			{"RegFence", abi.RegFence, ch.head},
			{"RegFenceCycles", abi.RegFenceCycles, 0},
			{"RegIrqCount", abi.RegIrqCount, 0},
		} {
			assert.Equal(t, r.want, status(r.off), "%v handed to its next owner: %s", ch.id, r.name)
		}
		for i := ch.head; i != ch.head+ch.size; i++ {
			if done, st := ch.completion(i); done {
				t.Errorf("%v handed over at head %d: command %d reads completed (%v) before it was submitted", ch.id, ch.head, i, st)
				break
			}
		}
		if ch.head > 0 {
			if done, _ := ch.completion(ch.head - 1); !done {
				t.Errorf("%v handed over at head %d: command %d, below the head, reads not completed", ch.id, ch.head, ch.head-1)
			}
		}
		i := ch.put(abi.Command{Op: abi.OpNop, Ctx: next.ctx})
		ch.ring(ch.next)
		assert.Equal(t, abi.StatusOK, ch.wait(i), "NOP on %v, the stranger's channel once", ch.id)
	}
	w.roundTrip(t, "after the next owner", 3)
	d.stop(t)
}

// A failure in a handed-over channel is reported as the failure it is, even
// when it lands in the entry where the previous owner's identical failure
// was reported. The daemon clears every status word at the handover (its
// own stores, not the engine's: resetHandedOver), so an engine that
// decided from memory of its own last store — "this entry already says
// bad opcode, skip the store" — would leave the next owner reading 0,
// StatusOK, for a command that failed. The engine must store what it
// last saw in the entry, or look at the entry itself.
func TestAFailureInAHandedOverEntryIsReported(t *testing.T) {
	d := startDaemon(t)
	ctl := control(t, d.node)
	bad := abi.Opcode(0xee) // not defined: the engine answers StatusBadOpcode
	require.False(t, bad.Defined(), "opcode %#x is defined; the test needs one that is not", uint8(bad))

	first := dialRaw(t, d.node)
	first.attach()
	ch := first.openChannel(abi.EngineCopy)
	j := ch.put(abi.Command{Op: bad, Ctx: first.ctx})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusBadOpcode, ch.wait(j), "the first owner's bad opcode on %v", ch.id)
	first.sock.Close()
	waitClients(t, ctl, 1) // only ctl: the first owner's channel has been handed back

	next := dialRaw(t, d.node)
	next.attach()
	nch := next.openChannel(abi.EngineCopy)
	require.Equal(t, ch.id, nch.id, "the next owner's copy channel is not the first owner's")
	require.Equal(t, j+1, nch.head, "%v handed over at head %d; the first owner ran one command, %d", nch.id, nch.head, j)
	// A lap of NOPs, up to the entry the first owner's failure was
	// reported in.
	var last uint64
	for nch.next != j+nch.size {
		last = nch.put(abi.Command{Op: abi.OpNop, Ctx: next.ctx})
	}
	nch.ring(nch.next)
	require.Equal(t, abi.StatusOK, nch.wait(last), "the last NOP of the lap on %v", nch.id)
	k := nch.put(abi.Command{Op: bad, Ctx: next.ctx})
	require.Equal(t, abi.CompletionWord(j, nch.mask), abi.CompletionWord(k, nch.mask), "commands %d and %d share no completion entry", j, k)
	nch.ring(nch.next)
	assert.Equal(t, abi.StatusBadOpcode, nch.wait(k), "the next owner's bad opcode on %v, in the entry of the first owner's", nch.id)
	d.stop(t)
}
