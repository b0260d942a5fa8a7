package abi

import "fmt"

// Idle gating.
//
// An engine whose channel has no work may spin (poll the doorbell until it
// moves), sleep (stop running until the driver wakes it), or do one and
// then the other. The driver chooses, per engine, in registers of the
// engine's privileged control page; the engine reads them each time it
// finds its ring empty, so a new choice takes effect at the next idle poll
// (the driver wakes a sleeping engine after changing them, so that it reads
// them too).
//
//	RegIdleMode       IdleHybrid:   spin for RegIdleBudget cycles, then sleep
//	                  IdleSpin:     never sleep
//	                  IdleSleep:    sleep as soon as the ring is empty
//	                  IdleAdaptive: spin for a budget the engine learns from
//	                                its own gaps, between RegIdleBudgetMin and
//	                                RegIdleBudgetMax, then sleep
//	RegIdleBudget     the hybrid spin, in device cycles (1 cycle = 1 ns)
//	RegIdleBudgetMin  the adaptive budget's bounds
//	RegIdleBudgetMax
//
// A sleeping engine cannot see the doorbell move, so the doorbell gains a
// need-wakeup handshake, the io_uring SQPOLL pattern (IORING_SQ_NEED_WAKEUP):
//
//	RegNeedWakeup  in the engine's read-only status page: 1 from just
//	               before it last looked at the doorbell on its way to sleep
//	               until it is awake again; 0 otherwise
//
// An engine on its way to sleep stores 1 in RegNeedWakeup, then loads its
// doorbell once more, and sleeps only if the tail has not moved. A
// submitter stores the new tail in RegDoorbell, then loads RegNeedWakeup,
// and if it reads 1 it wakes the engine (the wake primitive of
// driver.Hardware: the one call in the protocol, since a store to memory
// wakes no thread). Each side stores, then loads what the other stores, so
// at least one sees the other: the engine finds the tail, or the submitter
// finds the flag. No command is left in a ring whose engine sleeps.
// device/idle.go and driver/idle.go carry the two halves, each with this
// argument beside it.

// IdleMode is what an engine does when its ring is empty: the value of
// RegIdleMode.
type IdleMode uint64

const (
	// IdleHybrid spins for RegIdleBudget cycles, then sleeps. The reset
	// value: a burst of commands never pays for a wake-up, a quiet engine
	// never burns a core for longer than the budget.
	IdleHybrid IdleMode = 0
	// IdleSpin polls the doorbell until it moves: the lowest latency, and a
	// core per engine, busy or not.
	IdleSpin IdleMode = 1
	// IdleSleep gates the engine as soon as its ring is empty: no CPU when
	// quiet, and a wake-up for the first command after every gap.
	IdleSleep IdleMode = 2
	// IdleAdaptive is hybrid with a budget the engine grows and shrinks
	// from how its last sleeps ended (device/adaptive.go).
	IdleAdaptive IdleMode = 3
)

// Defined reports whether m is an idle mode.
func (m IdleMode) Defined() bool { return m <= IdleAdaptive }

func (m IdleMode) String() string {
	switch m {
	case IdleHybrid:
		return "hybrid"
	case IdleSpin:
		return "spin"
	case IdleSleep:
		return "sleep"
	case IdleAdaptive:
		return "adaptive"
	}
	return fmt.Sprintf("idlemode(%d)", uint64(m))
}

// DefaultIdleBudget is the reset value of RegIdleBudget: 50,000 cycles,
// 50 µs. It was set by the ski-rental rule — spin for about as long as the
// wake-up that sleeping would cost the next command — when a wake-up cost
// about that here. It costs less now: in the idle record at 885b3ad sleep
// mode's fill after a 300 µs gap, which paid a wake every time, took
// 8.8 µs at the median and at most 24.8 µs at the 95th percentile in any
// of its five passes. So an engine that spins to the end of its budget has
// burned more than even a slow wake it avoided would have cost; the book's
// "What idle costs" reads those rows, and says why the default stays.
const DefaultIdleBudget = 50_000

// The reset values of the adaptive budget's bounds: 25 µs to 60 µs, a
// range around the hybrid default that the learning moves within. Both were
// set by measurement (IdleMix, in the book's "What idle costs"). The floor:
// an engine that polled before it slept answered the next command faster
// than one that slept at once, so the adaptive engine never sleeps at once.
// The ceiling: the engine learns a gap only after it has seen it, so on
// gaps that keep growing it spins about as long as the last gap (half as
// long again, with adaptive.go's headroom) and then sleeps anyway; with
// 200 µs allowed, before the headroom, that cost it more CPU than the
// default on mix=drift in one interleaved run, 0.256 cores against 0.236
// (commit 6b8bd67; no record measures that bound).
const (
	DefaultIdleBudgetMin = 25_000
	DefaultIdleBudgetMax = 60_000
)

// ANCHOR: idleregs

// Per-engine idle registers.
//
// In the engine's read-only status page, at EngineStatusPage(e), on a line
// of their own:
const (
	// RegNeedWakeup is 1 while the engine is asleep or on its way there
	// (see the handshake above). RegSleeps counts the times it has gone to
	// sleep. RegIdleBudgetNow is the budget an adaptive engine has
	// learnt, published each time it learns (DefaultIdleBudget until
	// then); a hybrid engine spins for RegIdleBudget.
	RegNeedWakeup    = 0x080
	RegSleeps        = 0x088
	RegIdleBudgetNow = 0x090
)

// In the engine's privileged control page, at EngineControlPage(e),
// written by the driver:
const (
	RegIdleMode      = 0x000
	RegIdleBudget    = 0x008
	RegIdleBudgetMin = 0x010
	RegIdleBudgetMax = 0x018
)

// ANCHOR_END: idleregs

// Values of RegEngineState beyond running and stopped.
const (
	// EngineAsleep: the engine has set RegNeedWakeup, found nothing to
	// do, and is about to wait for a wake-up, or waiting.
	EngineAsleep = 2
)

// EngineControlPage returns the offset of engine e's privileged control
// page: the pages after the DMA window's, one per engine.
func EngineControlPage(e Engine) uint64 { return WindowPage + RegPageSize + uint64(e)*RegPageSize }
