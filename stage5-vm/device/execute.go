package device

import (
	"encoding/binary"

	"softgpu/stage5-vm/abi"
)

// This file is the engines' command interpreter. Its contract: execute
// never panics on a command's contents, and it writes only inside the byte
// ranges the command names.
//
// A command works on operands — address ranges — and the interpreter walks
// each one as a sequence of runs: pieces of contiguous memory that runs.go
// resolves, one at a time, from a cursor (job.done). Here every operand
// is a single run, resolved before a byte moves, so a bad command
// changes nothing. The walk is what later mechanisms hook into: an address
// space with pages resolves a run per page, a scheduler can stop between
// runs and resume from the cursor, a fault can stop at a run and replay it.

// job is a command being executed: its descriptor as the engine read it
// when it fetched it, decoded, and how far execution has got.
type job struct {
	cmd          abi.Command // the descriptor, decoded; the slot may be reused meanwhile
	reservedZero bool        // the descriptor's reserved bytes were zero (abi.ReservedZero)
	seq          uint64      // the sequence number it was fetched under
	done         uint64      // the cursor: bytes of each operand handled (cycles, for DELAY)
	sum          uint64      // SUM32's running total
	start        uint64      // when the engine took it (only kept while tracing)
}

// load makes j the command encoded in desc, fetched under seq. It decodes
// straight from desc and keeps only what it read — the fields, and whether
// the reserved bytes were zero — so nothing written to desc afterwards can
// change the command. (Copying the 64 bytes out first and decoding the copy
// would be safe too, but it is a second pass over every descriptor, and a
// stream of small commands pays for it in the engine's time per command.)
func (j *job) load(desc []byte, seq uint64) {
	j.cmd = abi.Decode(desc)
	j.reservedZero = abi.ReservedZero(desc)
	j.seq, j.done, j.sum = seq, 0, 0
}

// ANCHOR: execute

// execute runs j and returns its status. The checks come in a fixed order,
// so a command with several faults always reports the first: opcode,
// engine, flags, reserved bytes, context, then alignment and range per
// operand.
// Whatever the outcome, the command's holds on the DMA window are released
// on the way out (see dma.go).
func (e *Engine) execute(j *job) abi.Status {
	st := e.dispatch(j)
	// A call, not a defer: dispatch has a return per check, more than Go
	// compiles a defer inline for (returns × defers must not exceed 15),
	// and a defer it cannot inline costs a runtime defer record on every
	// command.
	e.releaseDMA()
	return st
}

// dispatch is execute without the release: the checks, then the operation.
func (e *Engine) dispatch(j *job) abi.Status {
	cmd := &j.cmd
	if !cmd.Op.Defined() {
		return abi.StatusBadOpcode
	}
	if !e.id.Supports(cmd.Op) {
		return abi.StatusWrongEngine
	}
	if !abi.FlagsDefined(cmd.Flags) {
		return abi.StatusBadFlags
	}
	if !j.reservedZero {
		return abi.StatusReserved
	}
	if st := e.enterContext(cmd.Ctx); st != abi.StatusOK {
		return st
	}
	switch cmd.Op {
	case abi.OpNop:
		return abi.StatusOK
	case abi.OpFill:
		if st := operand(cmd.Dst, cmd.Size, 1); st != abi.StatusOK {
			return st
		}
		return e.fillRuns(j)
	case abi.OpCopy:
		if st := operand(cmd.Src, cmd.Size, 1); st != abi.StatusOK {
			return st
		}
		if st := operand(cmd.Dst, cmd.Size, 1); st != abi.StatusOK {
			return st
		}
		return e.copyRuns(j)
	case abi.OpDelay:
		return e.delay(j)
	case abi.OpSum32:
		if st := operand(cmd.Src, cmd.Size, 4); st != abi.StatusOK {
			return st
		}
		if st := operand(cmd.Dst, 8, 8); st != abi.StatusOK {
			return st
		}
		return e.sumRuns(j)
	case abi.OpAdd32:
		if st := operand(cmd.Dst, cmd.Size, 4); st != abi.StatusOK {
			return st
		}
		return e.addRuns(j)
	}
	return abi.StatusBadOpcode // unreachable: Defined covers every case above
}

// ANCHOR_END: execute

// operand checks what can be checked of [addr, addr+size) before any run
// is resolved: alignment, and that the end does not wrap the 64-bit address
// space (a size that wraps would otherwise look like a small, valid range).
func operand(addr, size, align uint64) abi.Status {
	if addr%align != 0 || size%align != 0 {
		return abi.StatusMisaligned
	}
	if addr+size < addr {
		return abi.StatusOutOfRange
	}
	return abi.StatusOK
}

// ANCHOR: walk

// fillRuns fills the destination run by run, from the cursor on.
func (e *Engine) fillRuns(j *job) abi.Status {
	c := &j.cmd
	for {
		e.checkInval() // a safe point: the engine holds no run here (mmu.go)
		dst, st := e.run(c.Dst+j.done, c.Size-j.done, writing)
		if st != abi.StatusOK {
			return st
		}
		fill(dst, byte(c.Value))
		j.done += uint64(len(dst))
		if j.done == c.Size {
			return abi.StatusOK
		}
	}
}

// ANCHOR: safepoint

// copyRuns copies the source to the destination run by run: each step
// resolves the run at the cursor in the source, then as much of the
// destination as that run covers, and moves the shorter of the two. When
// the destination overlaps the source from above, it walks down from the
// top instead, as memmove does, so no byte is overwritten before it is
// read.
func (e *Engine) copyRuns(j *job) abi.Status {
	c := &j.cmd
	if c.Dst > c.Src && c.Dst-c.Src < c.Size {
		return e.copyRunsDown(j)
	}
	for {
		e.checkInval() // a safe point: the engine holds no run here (mmu.go)
		src, st := e.run(c.Src+j.done, c.Size-j.done, reading)
		if st != abi.StatusOK {
			return st
		}
		dst, st := e.run(c.Dst+j.done, uint64(len(src)), writing)
		if st != abi.StatusOK {
			return st
		}
		j.done += uint64(copy(dst, src)) // memmove: a run may overlap its partner
		if j.done == c.Size {
			return abi.StatusOK
		}
	}
}

// ANCHOR_END: safepoint
// ANCHOR_END: walk

// copyRunsDown is copyRuns from the top: the cursor counts the bytes copied
// below the end.
func (e *Engine) copyRunsDown(j *job) abi.Status {
	c := &j.cmd
	for {
		e.checkInval() // a safe point: the engine holds no run here (mmu.go)
		left := c.Size - j.done
		src, st := e.runBefore(c.Src+left, left, reading)
		if st != abi.StatusOK {
			return st
		}
		dst, st := e.runBefore(c.Dst+left, uint64(len(src)), writing)
		if st != abi.StatusOK {
			return st
		}
		n := uint64(len(dst))
		copy(dst, src[uint64(len(src))-n:])
		j.done += n
		if j.done == c.Size {
			return abi.StatusOK
		}
	}
}

// sumRuns adds up the source's words run by run (runs never split a word:
// they start at aligned addresses and are cut at aligned boundaries), then
// stores the total.
func (e *Engine) sumRuns(j *job) abi.Status {
	c := &j.cmd
	for {
		e.checkInval() // a safe point: the engine holds no run here (mmu.go)
		src, st := e.run(c.Src+j.done, c.Size-j.done, reading)
		if st != abi.StatusOK {
			return st
		}
		j.sum += sum32(src)
		j.done += uint64(len(src))
		if j.done == c.Size {
			break
		}
	}
	dst, st := e.run(c.Dst, 8, writing)
	if st != abi.StatusOK {
		return st
	}
	binary.LittleEndian.PutUint64(dst, j.sum)
	return abi.StatusOK
}

// addRuns adds the constant to the destination's words run by run.
func (e *Engine) addRuns(j *job) abi.Status {
	c := &j.cmd
	for {
		e.checkInval() // a safe point: the engine holds no run here (mmu.go)
		dst, st := e.run(c.Dst+j.done, c.Size-j.done, writing)
		if st != abi.StatusOK {
			return st
		}
		add32(dst, uint32(c.Value))
		j.done += uint64(len(dst))
		if j.done == c.Size {
			return abi.StatusOK
		}
	}
}

// fill sets every byte of b to v. It builds a 64-byte block of v with eight
// word stores and copies it in, which is all of a small fill; a larger one
// then doubles, copying the filled prefix over what follows, so it is a few
// memmoves, not a byte loop. (Doubling from a single byte, as this did at
// first, spent six memmoves on a 64-byte fill: half the engine's time per
// command in FillStream in the profile of the day, which no record keeps.)
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

// delay keeps the engine busy for the command's cycles, the way a long
// shader would, with the cursor counting the cycles done. It yields like
// pollLoop does, for the same reason, and gives up with StatusAborted if the
// device is stopped meanwhile. The comparison is on elapsed cycles, so a
// huge count cannot overflow a deadline.
func (e *Engine) delay(j *job) abi.Status {
	clock := e.dev.clock
	cycles := j.cmd.Value
	start := clock.Now() - j.done
	for polls := 1; ; polls++ {
		if j.done = clock.Now() - start; j.done >= cycles {
			return abi.StatusOK
		}
		if e.stopRequested() {
			return abi.StatusAborted
		}
		e.checkInval() // a DELAY holds no translation: every poll is a safe point
		e.pause(polls)
	}
}
