package abi

import "encoding/binary"

// The command ring. Each engine has one: RingSize slots of CommandSize bytes
// in host-visible memory, RingSize a power of two read from RegRingSize, and
// beside it a status array of RingSize entries of StatusEntrySize bytes.
//
//	index i (free-running uint64) ──► slot i & (RingSize-1)
//
//	ring    [ slot 0 | slot 1 | ... | slot RingSize-1 ]   64 B each, driver-written
//	status  [ st 0   | st 1   | ... | st RingSize-1   ]   4 B each, engine-written
//
// Indices never wrap back to a slot number: the driver's tail (RegDoorbell)
// and the engine's head (RegHead) count commands since the ring started, and
// only the mask turns one into a slot. The commands in the ring are those
// with head <= i < tail, and the protocol keeps tail-head <= RingSize.
//
// The engine runs command i from slot i&mask, writes its Status into status
// entry i&mask, and only then stores i+1 into RegHead: a driver that has
// loaded a head above i may read command i's status. The entry stays valid
// until the driver writes command i+RingSize into the same slot, which it
// must not do before it has read the entry (see driver/ring.go).

// StatusEntrySize is the size of one entry of the status array: a
// little-endian uint32 holding a Status.
const StatusEntrySize = 4

// SlotOffset returns the byte offset in the ring of the slot that holds the
// command with ring index i. mask is RingSize-1.
func SlotOffset(i, mask uint64) uint64 { return (i & mask) * CommandSize }

// StatusOffset returns the byte offset in the status array of the entry of
// the command with ring index i. mask is RingSize-1.
func StatusOffset(i, mask uint64) uint64 { return (i & mask) * StatusEntrySize }

// PutStatus writes st into the status entry that starts at b[0].
func PutStatus(b []byte, st Status) { binary.LittleEndian.PutUint32(b, uint32(st)) }

// LoadStatus reads the status entry that starts at b[0].
func LoadStatus(b []byte) Status { return Status(binary.LittleEndian.Uint32(b)) }
