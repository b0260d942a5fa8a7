package device

import (
	"encoding/binary"

	"softgpu/stage7-idle/abi"
)

// This file is the engine's side of fences and interrupts (the contract is in
// abi/fence.go). After a command with FlagFence completes — its status and
// head already published — the engine writes its fence timeline; with
// FlagInterrupt as well, it then reads the driver's arm registers and may
// raise the interrupt line.
//
// The interrupt line is a function the driver connects with
// SetInterruptHandler. The engine calls it on its own goroutine, the way a
// CPU runs a hard interrupt handler on whatever it was doing: the handler
// must not block, and the time it takes is time the engine does not run
// commands. What the handler does with the interrupt — signal waiters there
// and then, or hand off to a thread — is the driver's business (driver/irq.go).

// fenceWork is what an engine must do for a command's fence, read from the
// descriptor before complete hands the slot back to the driver (after which
// the driver may write the next command into it).
type fenceWork struct {
	flags uint8
	value uint64
}

func fenceOf(desc []byte) fenceWork {
	return fenceWork{flags: desc[abi.OffFlags], value: binary.LittleEndian.Uint64(desc[abi.OffFence:])}
}

// resetFence puts engine e's fence timeline at RingStart, as a device comes
// out of reset, with interrupts disarmed.
func (d *Device) resetFence(e abi.Engine) {
	bank := abi.EngineRegs(e)
	d.regs.Store(bank+abi.RegFence, d.cfg.RingStart)
	d.regs.Store(bank+abi.RegIrqArm, abi.IrqOff)
}

// SetInterruptHandler connects the interrupt line to h, which the engines call
// with their own id each time they raise it. A nil h disconnects the line;
// interrupts raised meanwhile are counted in RegIrqCount and lost.
func (d *Device) SetInterruptHandler(h func(abi.Engine)) {
	if h == nil {
		d.irq.Store(nil)
		return
	}
	d.irq.Store(&h)
}

// ANCHOR: signal
// signal writes the fence of a completed command and raises the interrupt
// line if the command asks for it and the driver's arm registers say so.
func (e *Engine) signal(f fenceWork) {
	if f.flags&abi.FlagFence == 0 || !abi.FlagsDefined(f.flags) {
		return // no fence asked for, or a command refused for its flags
	}
	regs := e.dev.regs
	regs.Store(e.bank+abi.RegFenceCycles, e.dev.clock.Now())
	// This store publishes the timeline (and the cycles just above). It
	// pairs with the driver's loads of RegFence: in Fence.Signaled, and in
	// the interrupt handler.
	regs.Store(e.bank+abi.RegFence, f.value)
	if f.flags&abi.FlagInterrupt == 0 {
		return
	}
	// No lost wake-up: the engine stores RegFence, then loads RegIrqArm and
	// RegIrqTarget; a waiter stores the target and the arm, then loads
	// RegFence (driver/fence.go, arm). Both are sequentially consistent, so
	// at least one side sees the other's store: either this load sees the
	// waiter's target and raises, or the waiter's load sees this fence and
	// does not sleep.
	switch regs.Load(e.bank + abi.RegIrqArm) {
	case abi.IrqEvery:
		e.raise()
	case abi.IrqTarget:
		if abi.Reached(f.value, regs.Load(e.bank+abi.RegIrqTarget)) {
			e.raise()
		}
	}
}

// ANCHOR_END: signal

// raise asserts the interrupt line: it counts the interrupt, then runs the
// driver's handler on this goroutine.
func (e *Engine) raise() {
	regs := e.dev.regs
	regs.Store(e.bank+abi.RegIrqCount, regs.Load(e.bank+abi.RegIrqCount)+1) // the engine is its only writer
	if h := e.dev.irq.Load(); h != nil {
		(*h)(e.id)
	}
}
