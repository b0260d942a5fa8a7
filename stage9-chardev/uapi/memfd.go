package uapi

import "softgpu/stage9-chardev/abi"

// The shared memory. The data path never goes through the socket: a client
// maps the memfds that ATTACH and CHANNEL_OPEN hand it, and from then on
// submits a command with stores (the slot, then the doorbell), learns
// that it has completed with loads (the completion entry, the fence
// timeline), and only makes a system call to wake a sleeping engine or to
// sleep itself. Each memfd holds pages of the device's register space at
// the offsets abi gives within a page, so the code that reads a register
// is the same whether the page is mapped from a memfd or sits in the
// daemon's own register space.
//
// The user memfd of a channel, mapped read-write (ChannelFDUser):
//
//	[0, PageSize)                     the channel's doorbell page, abi.DoorbellPage(c):
//	                                  abi.RegDoorbell, abi.RegIrqArm, abi.RegIrqTarget
//	[UserRingOffset, +RingSize*64)    the submission ring: RingSize slots of abi.CommandSize
//
// The status memfd of a channel, mapped read-only (ChannelFDStatus):
//
//	[0, PageSize)                     the channel's status page, abi.ChannelStatusPage(c):
//	                                  abi.RegChannelFault, abi.RegFence, …
//	[StatusCompletionsOffset, …)      the completion ring: RingSize entries of
//	                                  abi.CompletionWords words (abi/ring.go)
//
// The public memfd of the device, mapped read-only (AttachFDPublic):
//
//	[PublicGlobalOffset, +PageSize)   the global page, abi.GlobalPage: abi.RegID, abi.RegDeviceState, …
//	[PublicEngineOffset(e), +PageSize) engine e's status page, abi.EngineStatusPage(e):
//	                                  abi.RegEngineState, abi.RegNeedWakeup, …
//
// What a client may write and what it may only read are in different
// memfds, so the protection holds whatever the host's page size: a
// client cannot map the status memfd writable at all.

// PageSize is the page of every memfd layout: abi.RegPageSize, the page of
// the register space. Offsets and sizes below are multiples of it.
const PageSize = 4096

// The offsets of the user memfd.
const (
	UserDoorbellOffset = 0        // the doorbell page
	UserRingOffset     = PageSize // the submission ring; slot i&mask at UserRingOffset + abi.SlotOffset(i, mask)
)

// The offsets of the status memfd.
const (
	StatusPageOffset        = 0        // the channel's status page
	StatusCompletionsOffset = PageSize // the completion ring; entry i&mask at word abi.CompletionWord(i, mask) from here
)

// The words of a completion entry (abi/ring.go), counted from the word
// abi.CompletionWord(i, mask) of the completion ring.
const (
	// CompletionIndexWord holds the ring index of the command the entry
	// completes. The engine stores it last: a client that loads index i
	// here (abi.Completed) may then read the rest of the entry.
	CompletionIndexWord = 0
	// CompletionStatusWord holds the command's abi.Status, in the low
	// 32 bits.
	CompletionStatusWord = 1
)

// PublicGlobalOffset is the offset of the global page in the public memfd.
const PublicGlobalOffset = 0

// PublicEngineOffset returns the offset of engine e's status page in the
// public memfd: the pages after the global one, in engine order.
func PublicEngineOffset(e abi.Engine) uint64 { return PageSize * (1 + uint64(e)) }

// UserSize returns the size of a channel's user memfd for rings of
// ringSize slots.
func UserSize(ringSize uint32) uint64 {
	return UserRingOffset + roundPage(uint64(ringSize)*abi.CommandSize)
}

// StatusSize returns the size of a channel's status memfd for rings of
// ringSize slots.
func StatusSize(ringSize uint32) uint64 {
	return StatusCompletionsOffset + roundPage(uint64(ringSize)*abi.CompletionSize)
}

// PublicSize returns the size of the public memfd: the global page and
// one status page per engine.
func PublicSize() uint64 { return PageSize * (1 + abi.NumEngines) }

// roundPage rounds n up to a multiple of PageSize.
func roundPage(n uint64) uint64 { return (n + PageSize - 1) &^ (PageSize - 1) }
