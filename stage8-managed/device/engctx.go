package device

import (
	"encoding/binary"
	"fmt"

	"softgpu/stage8-managed/abi"
)

// This file is the engine's context: the state a real engine holds for the
// channel it is running — register files, shared memory, the pipeline's
// queues — which a preemption must write out to memory before another
// channel may use the engine, and a resume must read back before the
// command can go on. That copy is what a context switch costs.
//
// The engine holds its live context in a buffer of Config.ContextSize
// bytes (context). Its first word is a stamp the engine writes when it
// saves: the channel and the ring index of the command it saved for,
// channel<<48 | index&(1<<48-1). Nothing else in the model reads the rest
// of the bytes; they are there for what moving them costs:
//
//	preempt (sched.go)                       resume (sched.go)
//	  the state block: descriptor, cursor      the state block, checked
//	  saveContext: context → CtxSave area      restoreContext: CtxSave area → context,
//	                                             the stamp checked
//
// Both go through physRun and copy, in runs of at most chunk bytes — the
// path a COPY's runs take, so a save costs what a COPY of the same bytes
// does. The save area is device memory the driver gives each preemptible
// channel (its runlist entry's CtxSave); the engine trusts neither its
// address nor what it reads back: a save area that is not 64-aligned
// inside device memory, or a context that reads back with another stamp,
// faults the channel (abi.FaultContextSave) and nothing else.
//
// Invariants:
//   - a preempted command's context is in its channel's save area from its
//     preemption to its resume (c.saved), stamped with the channel and the
//     command's index;
//   - len(e.context) == Config.ContextSize, fixed for the device's life.

// DefaultContextSize is the engine context of a zero Config: 256 KiB, the
// register file of one streaming multiprocessor on NVIDIA's Volta to
// Hopper (64 K 32-bit registers), or the vector registers of one AMD CU
// (4 SIMDs × 64 KiB), which is what compute preemption at instruction
// granularity saves per SM or CU, before shared memory. A whole GPU saves
// that times its SMs — tens of MB — but this device's engine is one such
// unit, so one unit's worth is the order of magnitude of its switch.
const DefaultContextSize = 256 << 10

// MaxContextSize bounds Config.ContextSize: 64 MiB, a whole large GPU's
// register files and shared memory.
const MaxContextSize = 64 << 20

// contextStampSize is the stamp at the head of a saved context; a context
// is at least this big.
const contextStampSize = 64

// checkContextConfig fills in the default context size and refuses one
// that is not a multiple of 64 between contextStampSize and MaxContextSize.
// The default is DefaultContextSize, or on a device of less than 16 MiB
// 1/64 of its memory, so that a small test device still has room for its
// channels' save areas.
func checkContextConfig(cfg *Config) error {
	if cfg.ContextSize == 0 {
		cfg.ContextSize = max(min(DefaultContextSize, cfg.MemorySize/64&^63), contextStampSize)
	}
	if cfg.ContextSize%64 != 0 || cfg.ContextSize < contextStampSize || cfg.ContextSize > MaxContextSize {
		return fmt.Errorf("%w: ContextSize %d is not a multiple of 64 in [%d, %d]", ErrConfig, cfg.ContextSize,
			contextStampSize, uint64(MaxContextSize))
	}
	return nil
}

// contextStamp is the stamp of channel c's command at ring index seq.
func contextStamp(c abi.Channel, seq uint64) uint64 { return uint64(c)<<48 | seq&(1<<48-1) }

// saveArea checks c's save area: 64-aligned, and all of it in device
// memory. It faults the channel if not.
func (e *Engine) saveArea(c *chanState) bool {
	n, mem := uint64(len(e.context)), uint64(len(e.dev.mem))
	if c.ctxSave == 0 || c.ctxSave%64 != 0 || c.ctxSave > mem || n > mem-c.ctxSave {
		e.fault(abi.FaultContextSave, c.ctxSave)
		return false
	}
	return true
}

// ANCHOR: savecontext

// saveContext writes the engine's context for the command at seq to the
// save area of c, the channel being served, and reports whether it could;
// if not, the channel is faulted.
func (e *Engine) saveContext(c *chanState, seq uint64) bool {
	if !e.saveArea(c) {
		return false
	}
	binary.LittleEndian.PutUint64(e.context, contextStamp(c.id, seq))
	e.moveContext(c.ctxSave, true)
	return true
}

// restoreContext reads the context of the command at seq back from c's
// save area into the engine, and reports whether it is the one
// saveContext wrote; if not, the channel is faulted.
func (e *Engine) restoreContext(c *chanState, seq uint64) bool {
	if !e.saveArea(c) {
		return false
	}
	e.moveContext(c.ctxSave, false)
	if want := contextStamp(c.id, seq); binary.LittleEndian.Uint64(e.context) != want {
		e.fault(abi.FaultContextSave, want)
		return false
	}
	return true
}

// moveContext copies the engine's context to device memory at pa (out), or
// from it, in runs of at most chunk bytes, as copyRuns moves a COPY's.
func (e *Engine) moveContext(pa uint64, out bool) {
	for done := uint64(0); done < uint64(len(e.context)); {
		n := min(chunk, uint64(len(e.context))-done)
		mem, st := e.physRun(pa+done, n, false)
		if st != abi.StatusOK {
			panic("device: moveContext: a save area saveArea accepted is outside device memory")
		}
		if out {
			copy(mem, e.context[done:done+n])
		} else {
			copy(e.context[done:done+n], mem)
		}
		done += n
	}
}

// ANCHOR_END: savecontext
