// Package mmio is memory-mapped I/O: the register space as both sides see
// it. The device owns the words; the driver reads and writes them by the
// byte offsets listed in package abi, as a real driver does through a BAR.
//
// Every register is a 64-bit word, read and written atomically, except
// abi.RegTimestamp, which reads the device clock instead of a stored word,
// and the interrupt status registers (abi.RegIrqCause, abi.RegIrqChannels),
// where a store clears the bits it names instead of replacing the word
// (write-one-to-clear) and the device sets bits with Set.
package mmio

import (
	"fmt"
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
)

// Registers is a register space: words[off/8] is the register at byte
// offset off.
type Registers struct {
	words  []atomic.Uint64
	clock  func() uint64 // what RegTimestamp reads
	shadow []uint64      // in race builds, a word per register for the detector (race_unsafe.go)
}

// NewRegisters returns a register space of size bytes, every word zero,
// whose RegTimestamp reads clock. words must hold size/8 words; the caller
// chooses where they live (aligned memory, or later a shared mapping).
func NewRegisters(words []atomic.Uint64, clock func() uint64) *Registers {
	r := &Registers{words: words, clock: clock}
	if raceEnabled {
		r.shadow = make([]uint64, len(words))
	}
	return r
}

// Load reads the register at byte offset off.
func (r *Registers) Load(off uint64) uint64 {
	if off == abi.RegTimestamp {
		return r.clock()
	}
	v := r.word(off).Load()
	r.acquire(off)
	return v
}

// Store writes v to the register at byte offset off. A store to
// RegTimestamp, which is not a stored word, is ignored.
func (r *Registers) Store(off, v uint64) {
	if off == abi.RegTimestamp {
		return
	}
	w := r.word(off)
	r.release(off)
	switch {
	case off == abi.RegIrqCause:
		w.And(^v) // write-one-to-clear
	case off >= abi.RegIrqChannels && off < abi.RegIrqChannels+8*abi.IrqChannelWords:
		w.And(^v) // write-one-to-clear, every word
	default:
		w.Store(v)
	}
}

// Add adds delta to the register at off atomically: for a counter more
// than one engine of the device may bump at once.
func (r *Registers) Add(off, delta uint64) {
	w := r.word(off)
	r.release(off)
	w.Add(delta)
	r.acquire(off)
}

// Set sets the bits of v in the register at off, leaving the others: how
// the device raises a cause in an interrupt status register.
func (r *Registers) Set(off, v uint64) {
	w := r.word(off)
	r.release(off)
	w.Or(v)
	r.acquire(off)
}

// release and acquire tell the race detector, in race builds, that a
// register access orders memory as the atomic itself does
// (race_unsafe.go); without -race they are empty.
func (r *Registers) release(off uint64) {
	if raceEnabled {
		raceRelease(&r.shadow[off/8])
	}
}

func (r *Registers) acquire(off uint64) {
	if raceEnabled {
		raceAcquire(&r.shadow[off/8])
	}
}

// Word returns the stored word of the register at byte offset off, for a
// caller that must name its address: a futex on it (package futex). Every
// access to the value still goes through Load and Store.
func (r *Registers) Word(off uint64) *atomic.Uint64 { return r.word(off) }

// Size returns the size of the register space in bytes.
func (r *Registers) Size() uint64 { return uint64(len(r.words)) * 8 }

// word panics on an offset outside the register space or not 8-aligned.
// Offsets are constants of package abi plus bank offsets the caller
// computed from an engine or channel it has already checked, so a bad one
// is a bug in this program, never something input can cause: the panic
// names the invariant. The message is formatted only when the panic is
// printed (offsetError), which keeps word small enough for the compiler
// to inline: every register access of both sides goes through it, the
// engine's polls included.
func (r *Registers) word(off uint64) *atomic.Uint64 {
	if off%8 != 0 || off/8 >= uint64(len(r.words)) {
		panic(offsetError{off, r.Size()})
	}
	return &r.words[off/8]
}

// offsetError is word's panic: a register offset outside a register space
// of size bytes, or not a word.
type offsetError struct{ off, size uint64 }

func (e offsetError) Error() string {
	return fmt.Sprintf("mmio: invariant broken: register offset %#x is not an aligned word inside the %#x-byte register space", e.off, e.size)
}
