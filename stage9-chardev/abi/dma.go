package abi

// ANCHOR: addresses

// DMA: how a command names host memory.
//
// Every address in a command lies in one 64-bit space, split by value:
//
//	0 ............ RegMemSize        device memory
//	RegMemSize ... BusBase           nothing (StatusOutOfRange)
//	BusBase ...... BusBase+BusSize   bus addresses: pinned host memory,
//	                                 reached through the DMA window
//
// The DMA window is a table of WindowSlots entries in a privileged page of
// the register space. Entry i, while its RegWinEnable reads 1, maps the bus
// range [RegWinBus, RegWinBus+RegWinSize) onto the same number of bytes of
// host memory starting at host address RegWinHost. The device resolves a
// bus address by finding the one enabled entry whose range holds its first
// byte; the whole range of the operand must then lie inside that entry.
//
// The host address is only a name. The device never turns it into a
// pointer: the driver first registers each region of host memory with the
// device itself (the platform's IOMMU, in this model), and the device
// accepts an entry only if the host range it names lies inside one region
// it was given. So:
//
//   - a bus address that no enabled entry holds fails the command with
//     StatusNoDMA, and so does an entry naming host memory the device was
//     never given;
//   - a range that starts in an entry and runs past its end fails with
//     StatusOutOfRange — even when the next bus addresses belong to another
//     entry: two entries adjacent on the bus are unrelated host memory;
//   - a range whose end wraps 2^64 fails with StatusOutOfRange, as in
//     device memory.
//
// Unregistering. The driver disables an entry (stores 0 to RegWinEnable)
// and then waits until no engine's RegDMAHeld has the entry's bit set;
// only then may it reuse the entry. An engine sets its bit before it reads
// the entry, and clears it when the command that touched the entry is done
// (see device/dma.go for why this order makes the wait sufficient).
const (
	// BusBase is the first bus address. It lies far above the largest
	// device memory, so the two kinds of address can never be confused.
	BusBase = 1 << 48
	// BusSize is the size of the bus address space the driver assigns
	// window ranges from.
	BusSize = 1 << 40

	// WindowSlots is the number of entries in the DMA window: one per
	// bit of RegDMAHeld.
	WindowSlots = 64
	// WindowRegStride is one cache line per entry. All four words of an
	// entry are written by the driver.
	WindowRegStride = 0x40

	RegWinHost   = 0x00 // driver: host address of the entry's first byte
	RegWinBus    = 0x08 // driver: bus address of the entry's first byte
	RegWinSize   = 0x10 // driver: bytes mapped
	RegWinEnable = 0x18 // driver: 1 while the entry maps; stored last when registering, first when unregistering

	// RegDMAHeld is in each engine's counters page, at
	// EngineStatusPage(e)+RegDMAHeld (counters.go), written by the engine:
	// bit i is set while the command the engine is running may touch the
	// host memory of window entry i. Its own cache line.
	RegDMAHeld = CountersOffset + 0x040
)

// ANCHOR_END: addresses

// WindowPage is the offset of the DMA window's privileged page, after the
// channels' banks: WindowSlots entries of WindowRegStride bytes fill it.
const WindowPage = channelBanksBase + NumChannels*channelBankStride

// WindowRegs returns the offset of window entry i's registers.
func WindowRegs(i int) uint64 { return WindowPage + WindowRegStride*uint64(i) }
