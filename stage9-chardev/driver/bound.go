package driver

// Bounded waits: stage 9's threat model, in the driver's half.
//
// In stage 9 this driver runs in softgpud, and everything its waits
// depend on — what is queued on a channel, how long a command runs, when
// a channel passes a mark — is chosen by clients that are strangers to
// the daemon and to each other. So here, and only here (the in-process
// stages trust their one program, and keep their unbounded spins), a
// wait on device or shared state that a client can prolong has a
// deadline past which the caller gets ErrTimeout, and a wait for a
// client's work waits only on channels of that client; and a wait on an
// engine's own answer (a TLB ack, a DMA hold, a runlist ack, the device
// stopping) has a deadline too, engineBound or commandBound, past which
// the engine is taken as hung. See the package comment (driver.go) for
// the rule and the list.

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/spin"
)

// ErrTimeout reports a wait on the device that passed its bound.
var ErrTimeout = errors.New("softgpu: the device did not answer within its bound")

// retireWait bounds how long HostAlloc (HOST_REGISTER) waits in all, with
// every window entry taken, for any one retiring behind commands still
// queued, and how long an allocation of device memory waits in all, with
// too little free, for any deferred free to pass (allocMemory): those
// commands are a client's, and may be a DELAY of 2^62 cycles. Past it the
// caller gets ErrNoWindow or ErrOutOfMemory, and may try again.
const retireWait = 100 * time.Millisecond

// engineBound is how long the driver waits for an engine to answer at its
// next safe point: a TLB invalidation's acknowledgement, or the device
// stopping. A safe point is never far: between two runs (a run moves at
// most maxRun, 1 MiB — about 50 µs at this machine's copy bandwidth), in
// every poll of a DELAY or a spin, in the idle loop; an asleep engine
// answers by being asleep. One second is four orders of magnitude past
// that, room for a two-core machine shared with other builds, where a
// runnable goroutine may wait tens of milliseconds for a core (three
// spinners on two cores waited about 20 ms for sysmon's preemption in
// MACHINE.md's hand probe). An engine
// that has not answered by then is hung, whatever the reason: the daemon
// trusts no engine to answer, even one that cannot miss a safe point by
// construction (the tests reach this bound through the device's Resolved
// hook, which holds an engine in the middle of a command).
const engineBound = time.Second

// commandBound is how long the driver waits for what engine e answers only
// between commands — a runlist's acknowledgement, the DMA holds of a
// command that resolved a window entry: engineBound past the longest a
// command may keep the engine, which the watchdog bounds (Config.Watchdog,
// RegWatchdog): it asks the command to stop at its limit, and resets the
// engine a limit later (device/watchdog.go). With no watchdog a command's
// time is the client's to choose, and the wait ends at engineBound; the
// daemon sets one by default.
func (d *Driver) commandBound(e abi.Engine) time.Duration {
	limit := time.Duration(d.regs.Load(abi.EngineControlPage(e) + abi.RegWatchdog)) // cycles are nanoseconds
	return engineBound + 2*limit + 2*limit/4                                        // preempt, reset, and a quarter-limit each for the unit's timer to fire late
}

// hungError reports that engine e did not answer what for within bound.
func hungError(e abi.Engine, what string, bound time.Duration) error {
	return fmt.Errorf("%w: %v did not %s within %v", ErrTimeout, e, what, bound)
}

// spinBounded polls cond until it reports true, yielding on the default
// cadence in time (internal/spin), for at most bound; then it returns
// ErrTimeout. It looks at the deadline every 64 polls, and once past it
// looks at cond once more: a waiter kept off its core across the deadline
// (a loaded machine can hold a goroutine that long) must not call an
// answer that came meanwhile a timeout.
func spinBounded(cond func() bool, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	yield := spin.NewCadence(0)
	for polls := 1; !cond(); polls++ {
		if yield.Due(polls) {
			runtime.Gosched()
		}
		if polls%64 == 0 && time.Now().After(deadline) {
			if cond() {
				return nil
			}
			return fmt.Errorf("%w (%v)", ErrTimeout, bound)
		}
	}
	return nil
}

// namers returns a test of whether a channel could name region p: its
// context maps p, or it is in context 0, the driver's own, which names
// host memory by bus address. A freed entry retires once those channels
// have passed what was queued before the free; another client's channel,
// which cannot reach p, never holds it (a stranger's DELAY that never
// ends would otherwise hold the entry for good). Driver.pinMu is held.
func namers(p *Pinned) func(*Channel) bool {
	ctxs := make(map[*Context]bool, len(p.mapped))
	for _, m := range p.mapped {
		ctxs[m.ctx] = true
	}
	return func(ch *Channel) bool {
		c := ch.Context()
		return c == nil || c.ID() == 0 || ctxs[c]
	}
}
