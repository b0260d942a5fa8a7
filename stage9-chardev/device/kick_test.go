package device

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/futex"
)

// TestAClientKicksTheEngineThroughItsDoorbell: an engine of a shared
// device asleep is woken by a FUTEX_WAKE on the doorbell word through the
// client's own mapping of the user memfd — no call into the device — and
// a wake-up for nothing (a kick with no doorbell moved, as a hostile
// client may send) costs it one look: it sleeps again, runs nothing, and
// faults nothing.
func TestAClientKicksTheEngineThroughItsDoorbell(t *testing.T) {
	d := openTest(t, Config{Shared: true})
	const e, c = abi.EngineCopy, abi.Channel(5)
	files, err := d.Share(c, nil)
	require.NoError(t, err)
	defer files.User.Close()
	defer files.Status.Close()
	user, _ := clientView(t, files)
	require.Equal(t, abi.RunlistOK, submitRunlist(t, d, e, []abi.RunlistEntry{rlEntry(d, abi.DefaultChannel(e), 1, 0), rlEntry(d, c, 1, 0)}), "runlist")
	setIdle(d, e, abi.IdleSleep, 0)
	waitAsleep(t, d, abi.EngineCompute, e)
	bell := wordAt(user, abi.RegDoorbell)
	start := bell.Load()

	t.Run("a kick for nothing", func(t *testing.T) {
		before := sleeps(d, e)
		// The engine is asleep with RegNeedWakeup set, so the first
		// wake finds it queued; it looks and sleeps again, a sleep more.
		// 10 s is orders of magnitude over one trip round pollLoop.
		for deadline := time.Now().Add(10 * time.Second); sleeps(d, e) == before; {
			futex.Wake(bell)
			if time.Now().After(deadline) {
				t.Fatal("10 s of kicks on the doorbell word never woke the sleeping engine")
			}
			time.Sleep(100 * time.Microsecond)
		}
		waitAsleep(t, d, abi.EngineCompute, e)
		require.Equal(t, uint64(0), d.regs.Load(abi.ChannelStatusPage(c)+abi.RegChannelFault), "after kicks for nothing, RegChannelFault")
		if got := bell.Load(); got != start {
			t.Fatalf("the doorbell moved to %#x from %#x", got, start)
		}
	})

	// Without the kick, each NOP would wait for the engine's futex sleep
	// to time out (kickTimeout, a second): a NOP over half that was not
	// woken by the kick. A wake-up takes microseconds; a loaded machine
	// delays a runnable thread by scheduler ticks, not half a second.
	t.Run("a kick after a doorbell", func(t *testing.T) {
		mask := d.cfg.RingSize - 1
		for k := range uint64(100) {
			begun := time.Now()
			i := start + k
			cmd := abi.Command{Op: abi.OpNop, Seq: i}
			cmd.Encode(user[abi.RegPageSize+abi.SlotOffset(i, mask):])
			bell.Store(i + 1)                                                // C1
			if d.regs.Load(abi.EngineStatusPage(e)+abi.RegNeedWakeup) != 0 { // C2
				futex.Wake(bell) // C3: the client's kick, not d.Wake
			}
			waitCompleted(t, d, c, i)
			if took := time.Since(begun); took > kickTimeout/2 {
				t.Fatalf("NOP %d took %v: the kick did not wake the engine", k, took)
			}
		}
	})
}
