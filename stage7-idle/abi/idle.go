package abi

import "fmt"

// Idle gating (stage 7).
//
// An engine whose ring is empty may spin (poll the doorbell until it moves),
// sleep (stop running until the driver wakes it), or do one and then the
// other. The driver chooses, per engine, in two registers of its own; the
// engine reads them each time it finds its ring empty, so a new choice takes
// effect at the next idle poll (the driver wakes a sleeping engine after
// changing them, so that it reads them too).
//
//	RegIdleMode    IdleHybrid: spin for RegIdleBudget cycles, then sleep
//	               IdleSpin:   never sleep
//	               IdleSleep:  sleep as soon as the ring is empty
//	RegIdleBudget  the hybrid spin, in device cycles (1 cycle = 1 ns)
//
// A sleeping engine cannot see the doorbell move, so the doorbell gains a
// need-wakeup handshake, the io_uring SQPOLL pattern (IORING_SQ_NEED_WAKEUP):
//
//	RegNeedWakeup  written by the engine: 1 from just before it last looked
//	               at the doorbell on its way to sleep until it is awake
//	               again; 0 otherwise
//
// An engine on its way to sleep stores 1 in RegNeedWakeup, then loads
// RegDoorbell once more, and sleeps only if the tail has not moved. A
// submitter stores the new tail in RegDoorbell, then loads RegNeedWakeup, and
// if it reads 1 it wakes the engine (device.Device.Wake: the one call in
// the protocol, since a store to memory wakes no thread). Each side stores,
// then loads what the other stores, so at least one sees the other: the
// engine finds the tail, or the submitter finds the flag. No command is left
// in a ring whose engine sleeps. device/idle.go and driver/idle.go carry the
// two halves, each with this argument beside it.

// IdleMode is what an engine does when its ring is empty: the value of
// RegIdleMode.
type IdleMode uint64

const (
	// IdleHybrid spins for RegIdleBudget cycles, then sleeps. The reset
	// value: a burst of commands never pays for a wake-up, a quiet engine
	// never burns a core for longer than the budget.
	IdleHybrid IdleMode = 0
	// IdleSpin polls the doorbell until it moves: the lowest latency, and a
	// core per engine, busy or not (stages 0 to 4 behaved so).
	IdleSpin IdleMode = 1
	// IdleSleep gates the engine as soon as its ring is empty: no CPU when
	// quiet, and a wake-up for the first command after every gap.
	IdleSleep IdleMode = 2
)

// Defined reports whether m is an idle mode of this stage.
func (m IdleMode) Defined() bool { return m <= IdleSleep }

func (m IdleMode) String() string {
	switch m {
	case IdleHybrid:
		return "hybrid"
	case IdleSpin:
		return "spin"
	case IdleSleep:
		return "sleep"
	}
	return fmt.Sprintf("idlemode(%d)", uint64(m))
}

// DefaultIdleBudget is the reset value of RegIdleBudget: 50,000 cycles,
// 50 µs. On the measured machine that is about what a wake-up costs, so an
// engine that spins to the end of its budget has burned about what sleeping
// would have cost the next command.
const DefaultIdleBudget = 50_000

// ANCHOR: idleregs
// Per-engine idle registers, at EngineRegs(e) + offset.
const (
	// RegNeedWakeup is written by the engine: 1 while it is asleep or on
	// its way there (see the handshake above). RegSleeps, on the same
	// line, counts the times it has gone to sleep.
	RegNeedWakeup = 0x180
	RegSleeps     = 0x188

	// RegIdleMode and RegIdleBudget are written by the driver (their own
	// line): an IdleMode, and the hybrid spin in cycles.
	RegIdleMode   = 0x1c0
	RegIdleBudget = 0x1c8
)

// ANCHOR_END: idleregs
