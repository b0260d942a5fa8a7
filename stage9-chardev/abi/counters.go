package abi

// The counters pages: what the device counts of everyone's work, kept off
// the pages every client maps.
//
// In this stage a client of the daemon maps the global page and every
// engine's status page (the public pages) to run the need-wakeup
// handshake, so a device-written word there that moves with the device's
// work is a window on every other client's: TLB hits and misses say how
// much memory another client touches, switches and preemptions when it
// submits, the command and sleep counts how much it runs, the
// invalidation, runlist and DMA handshakes when it frees, opens channels
// and copies host memory, the fault buffer's pointers when its managed
// memory faults. Those words live instead in the counters pages, of class
// PagePrivate: written by the device, read by the driver's device-wide
// half, mapped by no client. The daemon reports them device-wide through
// INFO. On the public pages stay the identity words, the device's state,
// and each engine's RegEngineState and RegNeedWakeup, which the handshake
// needs: they tell that an engine is busy, not whose work it runs.
//
// An engine's counters are addressed as every engine register is, from
// its status page — EngineStatusPage(e) + RegTLBMisses — and each one's
// constant is CountersOffset plus its place in the counters page, so that
// sum lands in EngineCountersPage(e). The driver and the engines name
// them exactly as the stages before did; only the page moved.
const (
	// engineCountersBase is engine 0's counters page; the engines'
	// follow with the stride of their status pages, then the global
	// counters page.
	engineCountersBase = ContextStatusPage + RegPageSize

	// CountersOffset is how far an engine's counters page lies past its
	// status page: the part of every engine counter's constant that
	// moves it off the public page.
	CountersOffset = engineCountersBase - engineStatusBase

	// GlobalCountersPage holds the device-wide counters that were on the
	// global page (the fault buffer's RegFaultPut and RegFaultOverflow).
	GlobalCountersPage = engineCountersBase + NumEngines*RegPageSize
)

// EngineCountersPage returns the offset of engine e's counters page.
func EngineCountersPage(e Engine) uint64 { return EngineStatusPage(e) + CountersOffset }
