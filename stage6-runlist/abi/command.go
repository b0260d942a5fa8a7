// Package abi is the binary contract between the driver and the device: the
// 64-byte command descriptor, the opcodes, the status codes and the register
// offsets. Everything here is data with a fixed little-endian layout; nothing
// here holds a Go pointer, so the same bytes could cross a process boundary or
// sit in memory the device reads on its own.
//
// One place lists every opcode (opcode.go), every status (status.go) and every
// register (registers.go). The layout tests in abi_test.go pin each offset.
package abi

import "encoding/binary"

// CommandSize is the size of one command descriptor: one cache line.
const CommandSize = 64

// ANCHOR: layout

// Byte offsets of the fields of an encoded command.
//
//	 0       1       2               4                               8
//	+-------+-------+---------------+-------------------------------+
//	|opcode | flags |   context     |           reserved            |
//	+-------+-------+---------------+-------------------------------+
//	|                          sequence                             |  8
//	|                     source address                            | 16
//	|                  destination address                          | 24
//	|                          size (bytes)                         | 32
//	|              value (fill byte, cycles, addend)                | 40
//	|             fence value (with FlagFence)                      | 48
//	|                          reserved                             | 56
//	+---------------------------------------------------------------+ 64
const (
	OffOpcode  = 0
	OffFlags   = 1
	OffContext = 2 // the context whose address space the addresses are in: 2 bytes, an abi.Context
	OffSeq     = 8
	OffSrc     = 16
	OffDst     = 24
	OffSize    = 32
	OffValue   = 40
	OffFence   = 48 // with FlagFence, the value the engine writes to the fence timeline; zero otherwise
)

// ANCHOR_END: layout

// Command is the decoded form of one descriptor. The driver fills one in,
// encodes it into the slot the engine reads, and the engine decodes it again:
// the engine never sees this struct, only its bytes.
type Command struct {
	Op    Opcode
	Flags uint8   // FlagFence, FlagInterrupt; any other bit is StatusBadFlags
	Ctx   Context // the context whose address space the command's addresses are in (vm.go)
	Seq   uint64  // chosen by the driver; the engine reports it back on completion
	Src   uint64  // virtual address read by COPY and SUM32
	Dst   uint64  // virtual address written by FILL, COPY, SUM32, ADD32
	Size  uint64  // bytes covered by the command
	Value uint64  // FILL: the byte (low 8 bits); DELAY: cycles; ADD32: the addend (low 32 bits)
	Fence uint64  // with FlagFence: the value the engine writes to its channel's fence timeline on completion
}

// definedFlags is every defined flag bit (fence.go).
const definedFlags = FlagFence | FlagInterrupt

// FlagsDefined reports whether every bit set in flags is a flag of this
// stage. The driver refuses a command that breaks this before submitting it;
// the engine refuses it too (StatusBadFlags), for a driver that does not.
func FlagsDefined(flags uint8) bool { return flags&^definedFlags == 0 }

// Encode writes c into b, which must be at least CommandSize bytes long. The
// reserved bytes are written as zero so that a slot never carries stale bytes
// from an earlier command.
func (c *Command) Encode(b []byte) {
	_ = b[CommandSize-1] // one bounds check for the whole descriptor
	// One word store writes the opcode, the flags, the context and, as
	// zero, the four reserved bytes after them; word stores clear the reserved tail too.
	// Encode runs once per command, so it avoids byte loops and memclr.
	binary.LittleEndian.PutUint64(b[OffOpcode:], uint64(c.Op)|uint64(c.Flags)<<(8*OffFlags)|uint64(c.Ctx)<<(8*OffContext))
	binary.LittleEndian.PutUint64(b[OffSeq:], c.Seq)
	binary.LittleEndian.PutUint64(b[OffSrc:], c.Src)
	binary.LittleEndian.PutUint64(b[OffDst:], c.Dst)
	binary.LittleEndian.PutUint64(b[OffSize:], c.Size)
	binary.LittleEndian.PutUint64(b[OffValue:], c.Value)
	binary.LittleEndian.PutUint64(b[OffFence:], c.Fence)
	for off := OffFence + 8; off < CommandSize; off += 8 {
		binary.LittleEndian.PutUint64(b[off:], 0)
	}
}

// ReservedZero reports whether every reserved byte of the encoded command in
// b is zero. The engine refuses a command that breaks this rule (with
// StatusReserved), so that those bytes can be given a meaning later
// without old garbage in them changing what a command does.
func ReservedZero(b []byte) bool {
	_ = b[CommandSize-1]
	// The engine asks this of every command, so it reads words, not bytes:
	// bytes 4-7 are the top four bytes of the first word, and the reserved
	// tail is whole words.
	if binary.LittleEndian.Uint64(b[OffOpcode:])>>32 != 0 {
		return false
	}
	for off := OffFence + 8; off < CommandSize; off += 8 {
		if binary.LittleEndian.Uint64(b[off:]) != 0 {
			return false
		}
	}
	return true
}

// Decode reads a command from b, which must be at least CommandSize bytes.
// Reserved bytes are not part of Command; see ReservedZero.
func Decode(b []byte) Command {
	_ = b[CommandSize-1]
	return Command{
		Op:    Opcode(b[OffOpcode]),
		Flags: b[OffFlags],
		Ctx:   Context(binary.LittleEndian.Uint16(b[OffContext:])),
		Seq:   binary.LittleEndian.Uint64(b[OffSeq:]),
		Src:   binary.LittleEndian.Uint64(b[OffSrc:]),
		Dst:   binary.LittleEndian.Uint64(b[OffDst:]),
		Size:  binary.LittleEndian.Uint64(b[OffSize:]),
		Value: binary.LittleEndian.Uint64(b[OffValue:]),
		Fence: binary.LittleEndian.Uint64(b[OffFence:]),
	}
}
