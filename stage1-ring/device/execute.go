package device

import (
	"encoding/binary"

	"softgpu/stage1-ring/abi"
)

// This file is the engines' command interpreter. Its contract: execute never
// panics on a command's contents, and it writes only inside the byte range
// the command names, after every check has passed. A bad command becomes a
// Status and leaves memory as it was.

// ANCHOR: execute
// execute runs the command encoded in desc and returns its status. The checks
// come in a fixed order, so a command with several faults always reports the
// first: opcode, engine, flags, reserved bytes, then alignment and range per
// operand.
func (e *Engine) execute(desc []byte) abi.Status {
	cmd := abi.Decode(desc)
	if !cmd.Op.Defined() {
		return abi.StatusBadOpcode
	}
	if !e.id.Supports(cmd.Op) {
		return abi.StatusWrongEngine
	}
	if cmd.Flags != 0 {
		return abi.StatusBadFlags
	}
	if !abi.ReservedZero(desc) {
		return abi.StatusReserved
	}
	switch cmd.Op {
	case abi.OpNop:
		return abi.StatusOK
	case abi.OpFill:
		dst, st := e.dev.span(cmd.Dst, cmd.Size, 1)
		if st != abi.StatusOK {
			return st
		}
		fill(dst, byte(cmd.Value))
	case abi.OpCopy:
		src, st := e.dev.span(cmd.Src, cmd.Size, 1)
		if st != abi.StatusOK {
			return st
		}
		dst, st := e.dev.span(cmd.Dst, cmd.Size, 1)
		if st != abi.StatusOK {
			return st
		}
		copy(dst, src) // memmove: overlapping ranges are fine
	case abi.OpDelay:
		return e.delay(cmd.Value)
	case abi.OpSum32:
		src, st := e.dev.span(cmd.Src, cmd.Size, 4)
		if st != abi.StatusOK {
			return st
		}
		dst, st := e.dev.span(cmd.Dst, 8, 8)
		if st != abi.StatusOK {
			return st
		}
		binary.LittleEndian.PutUint64(dst, sum32(src))
	case abi.OpAdd32:
		dst, st := e.dev.span(cmd.Dst, cmd.Size, 4)
		if st != abi.StatusOK {
			return st
		}
		add32(dst, uint32(cmd.Value))
	}
	return abi.StatusOK
}

// ANCHOR_END: execute

// ANCHOR: span
// span returns device memory [addr, addr+size) if the range is aligned to
// align and lies wholly inside memory. The end is computed once and compared
// with addr, so a size that wraps the 64-bit address space is caught rather
// than turned into a small, valid-looking range.
func (d *Device) span(addr, size, align uint64) ([]byte, abi.Status) {
	if addr%align != 0 || size%align != 0 {
		return nil, abi.StatusMisaligned
	}
	end := addr + size
	if end < addr || end > uint64(len(d.mem)) {
		return nil, abi.StatusOutOfRange
	}
	return d.mem[addr:end:end], abi.StatusOK
}

// ANCHOR_END: span

// fill sets every byte of b to v. It builds a 64-byte block of v with eight
// word stores and copies it in, which is all of a small fill; a larger one
// then doubles, copying the filled prefix over what follows, so it is a few
// memmoves, not a byte loop. (Doubling from a single byte, as this did at
// first, spent six memmoves on a 64-byte fill: half the engine's time per
// command in FillStream.)
func fill(b []byte, v byte) {
	var block [64]byte
	word := uint64(v) * 0x0101010101010101 // v in every byte
	for i := 0; i < len(block); i += 8 {
		binary.LittleEndian.PutUint64(block[i:], word)
	}
	for n := copy(b, block[:]); n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

func sum32(b []byte) uint64 {
	var s uint64
	for i := 0; i+4 <= len(b); i += 4 {
		s += uint64(binary.LittleEndian.Uint32(b[i:]))
	}
	return s
}

func add32(b []byte, v uint32) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(b[i:])+v)
	}
}

// delay keeps the engine busy for the given number of cycles, the way a long
// shader would. It yields like pollLoop does, for the same reason, and gives
// up with StatusAborted if the device is closed meanwhile. The comparison is
// on elapsed cycles, so a huge count cannot overflow a deadline.
func (e *Engine) delay(cycles uint64) abi.Status {
	clock := e.dev.clock
	start := clock.Now()
	for polls := 1; clock.Now()-start < cycles; polls++ {
		if e.dev.stopping.Load() {
			return abi.StatusAborted
		}
		e.pause(polls)
	}
	return abi.StatusOK
}
