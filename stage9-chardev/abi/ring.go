package abi

// The rings. Each channel has two, in host-visible memory, RingSize entries
// each, RingSize a power of two read from RegRingSize:
//
//	index i (free-running uint64) ──► entry i & (RingSize-1) of each ring
//
//	submission  [ slot 0 | slot 1 | ... ]   CommandSize (64) bytes each, written by the driver
//	completion  [ cqe 0  | cqe 1  | ... ]   CompletionSize (16) bytes each, written by the engine
//
// Indices never wrap back to a slot number: the driver's tail (RegDoorbell)
// counts commands since the ring started, and only the mask turns an index
// into an entry. The engine runs command i from submission slot i&mask and
// then writes completion entry i&mask:
//
//	word 0  the ring index i of the command it completes — stored last,
//	        so a driver that loads i there may read the rest
//	word 1  the command's Status, in the low 32 bits
//
// A completion entry holds, over time, indices i, i+RingSize, i+2·RingSize
// …: it only ever grows, so "command i has completed" is the wrap-safe test
// int64(entry-i) >= 0, which stays true after the entry is reused. At reset
// every entry holds the index one lap before the first that maps to it, so
// every index below the starting one reads as completed and none above it.
//
// The driver reads one line the engine wrote to learn that a command is
// done and how it ended — the arrangement of io_uring's and NVMe's
// completion queues. The driver reuses submission slot i&mask for command
// i+RingSize only once it has read completion i ("reaped" it), so the
// status of i is never overwritten before someone has read it.

// CompletionSize is the size of one completion entry: two words.
const CompletionSize = 16

// CompletionWords is CompletionSize in 64-bit words.
const CompletionWords = CompletionSize / 8

// SlotOffset returns the byte offset in the submission ring of the slot
// that holds the command with ring index i. mask is RingSize-1.
func SlotOffset(i, mask uint64) uint64 { return (i & mask) * CommandSize }

// CompletionWord returns the index, in the completion ring seen as 64-bit
// words, of word 0 of the entry of the command with ring index i; word 1 is
// the next one.
func CompletionWord(i, mask uint64) uint64 { return (i & mask) * CompletionWords }

// Completed reports whether the completion entry that now holds index
// entry says that command i has completed: wrap-safe, entry >= i.
func Completed(entry, i uint64) bool { return int64(entry-i) >= 0 }
