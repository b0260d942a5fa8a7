package abi

// Fences and interrupts.
//
// Each channel has a fence timeline: a 64-bit value in its read-only status
// page that the engine writes when a command carrying FlagFence completes,
// with the value the command names. The driver gives its fenced commands
// increasing values, and the engine completes them in ring order, so the
// timeline only moves forward: "my fence has signalled" is a wrap-safe
// comparison, Reached(timeline, fence).
//
// A command with FlagInterrupt as well may raise the device's interrupt line
// when it completes. Whether it does is the driver's choice, written in two
// registers of the channel's user page, which the engine reads after it
// has written the timeline:
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
//
// The interrupt line is one for the whole device, as on real hardware. To
// raise it the engine sets its reason in RegIrqCause — and, for a fence or
// a fault, the channel's bit in RegIrqChannels — and then signals the
// line; the driver's interrupt thread reads both, acknowledges what it
// read by writing the same bits back (write-one-to-clear), and handles it.

// Command flags.
const (
	FlagFence     = 1 << 0 // on completion, write Command.Fence to the channel's fence timeline
	FlagInterrupt = 1 << 1 // after the fence, raise the interrupt line as RegIrqArm says
)

// ANCHOR: fenceregs

// Per-channel fence registers.
//
// In the channel's read-only status page, at ChannelStatusPage(c), on one
// line the engine writes:
const (
	// RegFence is the channel's fence timeline: the last fence value
	// the engine wrote. RegFenceCycles, on the same line, is the device
	// clock read just after it was written, so a waiter can tell how long
	// its wake-up took. RegIrqCount counts the fence interrupts the
	// channel has raised.
	RegFence       = 0x080
	RegFenceCycles = 0x088
	RegIrqCount    = 0x090
)

// In the channel's user page, at DoorbellPage(c), on a line of their own
// (the driver writes them; the engine only reads them):
const (
	RegIrqArm    = 0x040
	RegIrqTarget = 0x048
)

// Values of RegIrqArm.
const (
	IrqOff    = 0
	IrqTarget = 1
	IrqEvery  = 2
)

// ANCHOR_END: fenceregs

// ANCHOR: irqregs

// The interrupt registers, in the privileged control page. Both are set by
// the device and cleared by the driver, one bit at a time: storing a value
// clears the bits set in it (write-one-to-clear) and leaves the others, so
// an acknowledgement never wipes out a cause raised after it was read.
const (
	// RegIrqCause says why the line was raised: IrqCause bits.
	RegIrqCause = ControlPage + 0x040
	// RegIrqChannels has bit c set while channel c has a fence interrupt,
	// or a fault, the driver has not acknowledged.
	RegIrqChannels = ControlPage + 0x080
)

// ANCHOR_END: irqregs

// Bits of RegIrqCause.
const (
	IrqCauseFence   = 1 << 0 // a channel's fenced command completed with its interrupt armed (see RegIrqChannels)
	IrqCauseStopped = 1 << 1 // the device has stopped: every blocked waiter should look at RegDeviceState
	IrqCauseChannel = 1 << 2 // a channel faulted (its bit in RegIrqChannels): its waiters should look at RegChannelFault
)

// Reached reports whether a timeline at value timeline has reached fence
// value fence. It is wrap-safe: it holds across 2^64 as long as the two are
// within 2^63 of each other, which a driver that hands out values in order
// guarantees.
func Reached(timeline, fence uint64) bool { return int64(timeline-fence) >= 0 }
