package abi

// Fences and interrupts (stage 2).
//
// Each engine has a fence timeline: a 64-bit value in host-visible memory
// that the engine writes when a command carrying FlagFence completes, with
// the value the command names. The driver gives its fenced commands
// increasing values, and the engine completes them in ring order, so the
// timeline only moves forward: "my fence has signalled" is a wrap-safe
// comparison, int64(timeline-fence) >= 0.
//
// A command with FlagInterrupt as well may raise the device's interrupt line
// when it completes. Whether it does is the driver's choice, written in two
// registers the engine reads after it has written the timeline:
//
//	RegIrqArm     IrqOff:    never raise
//	              IrqTarget: raise if the timeline has reached RegIrqTarget
//	              IrqEvery:  raise for every such command
//	RegIrqTarget  the lowest fence value any blocked waiter waits for
//
// IrqTarget is the targeted wake-up: a waiter publishes the value it needs,
// and the device interrupts only when that value is reached, so a waiter is
// never woken for a fence it does not care about. IrqEvery is the untargeted
// alternative, kept to measure the futile wake-ups it causes.

// Command flags.
const (
	FlagFence     = 1 << 0 // on completion, write Command.Fence to the engine's fence timeline
	FlagInterrupt = 1 << 1 // after the fence, raise the interrupt line as RegIrqArm says

	flagsDefined = FlagFence | FlagInterrupt
)

// FlagsDefined reports whether every bit of flags is a flag of this stage.
func FlagsDefined(flags uint8) bool { return flags&^flagsDefined == 0 }

// ANCHOR: fenceregs
// Per-engine fence and interrupt registers, at EngineRegs(e) + offset.
const (
	// RegFence is written by the engine: the last fence value it wrote,
	// the engine's fence timeline. RegFenceCycles, on the same line and
	// written just before it, is the device clock at that moment, so a
	// waiter can tell how long its wake-up took.
	RegFence       = 0x080
	RegFenceCycles = 0x088
	// RegIrqCount is written by the engine: interrupts it has raised.
	RegIrqCount = 0x090

	// RegIrqArm and RegIrqTarget are written by the driver (their own
	// line): when the engine should raise the interrupt line.
	RegIrqArm    = 0x0c0
	RegIrqTarget = 0x0c8
)

// Values of RegIrqArm.
const (
	IrqOff    = 0
	IrqTarget = 1
	IrqEvery  = 2
)

// ANCHOR_END: fenceregs

// Reached reports whether a timeline at value timeline has reached fence
// value fence. It is wrap-safe: it holds across 2^64 as long as the two are
// within 2^63 of each other, which a driver that hands out values in order
// guarantees.
func Reached(timeline, fence uint64) bool { return int64(timeline-fence) >= 0 }
