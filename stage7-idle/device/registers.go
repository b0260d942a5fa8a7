package device

import (
	"fmt"
	"sync/atomic"

	"softgpu/stage7-idle/abi"
)

// Registers is the device's register space: 64-bit words at the byte offsets
// listed in package abi, each read and written atomically. It is the only
// device state the driver may touch besides host-visible memory (the command
// slots and device memory itself).
type Registers struct {
	words []atomic.Uint64 // words[off/8] is the register at byte offset off
}

func newRegisters(size uint64) *Registers {
	return &Registers{words: alignedWords(int(size / 8))}
}

// Load reads the register at byte offset off.
func (r *Registers) Load(off uint64) uint64 { return r.word(off).Load() }

// Store writes v to the register at byte offset off.
func (r *Registers) Store(off, v uint64) { r.word(off).Store(v) }

// word panics on an offset outside the register space or not 8-aligned:
// offsets are constants from package abi, so a bad one is a driver bug, not
// something a caller can cause.
func (r *Registers) word(off uint64) *atomic.Uint64 {
	if off%8 != 0 || off/8 >= uint64(len(r.words)) {
		panic(fmt.Sprintf("device: register offset %#x outside the %#x-byte register space", off, abi.RegSpaceSize))
	}
	return &r.words[off/8]
}
