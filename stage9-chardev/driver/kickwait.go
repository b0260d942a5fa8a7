package driver

// A synchronous wait after a kick, across the process boundary: the wait
// of a command whose doorbell found the engine asleep, on a channel
// attached in a client (client.go), blocks at once instead of polling its
// budget first.
//
// Why not poll. A client's kick is a FUTEX_WAKE of the doorbell word that
// the daemon's engine sleeps on (device/kick.go); the kernel then puts the
// engine's thread on a CPU, and on the two-vCPU machine it is often the
// kicking client's own. There the client's polling and the woken engine
// share one CPU by the kernel's fair share: the engine runs the command,
// and then spins its idle budget (the daemon's default is 100 µs,
// server.DefaultIdleBudget) before it sleeps, yielding as it spins, and
// the client, runnable beside it, sees the completion only when the
// kernel gives the CPU back — often not before the engine sleeps. Measured on the development machine (loaded,
// medians of 400 NOPs after a 3 ms gap, the device clock read on both
// sides): doorbell to the engine's fence stamp 60 µs, the stamp to the
// client seeing it 62–66 µs with both processes on one CPU and 4–6 µs with
// each on its own; unpinned, the split was the one-CPU split. The
// client's waits did not sleep (0 to 8 sleeps in 400): the cost was not a
// second wake, but a polling client sharing a CPU with the engine it woke.
// A client that sleeps leaves that CPU to the engine, and the engine's
// fence vector wakes it (device.FenceVector): a second wake across the
// boundary, which costs less than the engine's idle budget spent beside a
// poller. Boundary/op=wake3ms/path=node and Baseline/op=futexpingpong
// measure the two.
//
// In-process, the kick is a token on a Go channel and handoff gives the
// engine the submitter's own thread (idle.go), where polling is right, so
// the rule is for attached channels only. A kick says the engine was asleep
// or on its way there; a wait that blocks at once for one that was still
// on its way pays a wake it need not have, never a lost one. An explicit
// PollBudget turns the rule off, as it turns off the copy estimate
// (estimate.go): the caller asked for that budget, and gets it for every
// wait.

// ANCHOR: kickwait

// No wake-up is lost by the order of the two halves: the client's kick
// and then its sleep compose two handshakes, each with its own argument,
// and neither relies on the other's timing.
//
//	client (Submit, awaitCommand)            engine (device/kick.go, fence.go)
//	C1 store tail → RegDoorbell               S1 store 1 → RegNeedWakeup
//	C2 load RegNeedWakeup: 1 →                L2 load every RegDoorbell
//	C3 FUTEX_WAKE(RegDoorbell)                W  futex_waitv on the doorbells
//	A1 store RegIrqTarget, RegIrqArm          F1 store RegFence
//	A2 load RegFence: reached? don't sleep    F2 load RegIrqArm, RegIrqTarget
//	A3 FUTEX_WAIT(RegFence, as loaded)        F3 FUTEX_WAKE(RegFence)
//
// C1..C3 against S1, L2, W is the kick's handshake (kick.go): the engine
// runs the command, woken or because it saw the doorbell. A1..A3 against
// F1..F3 is the fence's (client.go, sleep): the waiter sees the fence, or
// the engine sees the arm and its wake finds the waiter asleep or makes
// the kernel's comparison in A3 fail. The waiter may arm before the engine
// is even awake; the fence's argument never assumed otherwise — a
// WaitBlock client arms so for every command. A sleep ended by nothing
// would end at the client's SleepTimeout and be counted
// (Stats.SleepTimeouts); client's TestAKickedWaitSleepsAndIsWoken holds
// that count at zero.

// ANCHOR_END: kickwait

// blockAfterKick reports whether the synchronous wait with exp blocks at
// once: its publish kicked the engine, the channel is attached in a
// client (its waiters sleep on the fence word, which the engine in the
// other process wakes), and the budget is the default one.
func (ch *Channel) blockAfterKick(exp expectation) bool {
	if !exp.kicked || ch.fenceWord == nil || !ch.estimate.enabled {
		return false
	}
	ch.stats.kickedBlocks.Add(1)
	return true
}
