package device

import "softgpu/stage7-idle/abi"

// This file is the device's DMA window (the layout is in abi/dma.go): how
// an engine turns a bus address into host memory, and the hold that keeps
// that memory mapped while a command touches it.
//
// Who writes what:
//
//	RegWinHost, RegWinBus, RegWinSize, RegWinEnable   the driver, per entry
//	RegDMAHeld                                        the engine, per engine
//	Engine.held                                       the engine's private copy of its RegDMAHeld
//
// Invariants:
//   - an engine touches the host memory of entry i only while bit i of its
//     RegDMAHeld is set, and only after it has read RegWinEnable = 1 with
//     the bit already set;
//   - an engine clears its bits only when a command is done (releaseDMA,
//     deferred by execute): a command holds what it resolved until it ends;
//   - the driver unmaps an entry's memory, or rewrites the entry, only after
//     it has stored RegWinEnable = 0 and then seen bit i clear in every
//     engine's RegDMAHeld.
//
// Why that makes unmapping safe. Holding and unregistering are each a store
// followed by a load of the other side's word, as in Dekker's algorithm:
//
//	engine: hold entry i (busSpan)        driver: unregister entry i
//	(1) store held|bit → RegDMAHeld       (3) store 0 → RegWinEnable
//	(2) load RegWinEnable                 (4) load RegDMAHeld until bit i is clear
//
// Go's atomics are sequentially consistent, so the four fall in one total
// order. If the engine's load (2) comes before the driver's store (3), the
// engine may use the entry, but then its store (1) also comes before the
// driver's load (4), so the driver sees the bit and waits for the release.
// If (2) comes after (3), the engine does not see the old mapping: it reads
// 0, or — if the driver has since registered a new mapping in the entry —
// the new fields, which the driver wrote before it stored 1. No order lets
// the engine use an old mapping while the driver finds the bit clear: the
// engine can never touch memory the driver has unmapped.
//
// The choice this makes for a region freed while commands name it: a
// command already holding the entry runs to its end and the driver waits for
// it; a command that reaches the entry after the driver disabled it fails
// with abi.StatusNoDMA. Nothing is cut short in the middle of a copy.

// testHookHeld, if set, runs each time an engine has taken a hold on a
// window entry and before it touches the entry's memory: tests use it to
// stop an engine in the middle of a command. Set it before Open, clear it
// after Close.
var testHookHeld func(e abi.Engine, entry int)

// ANCHOR: busspan
// busSpan resolves the bus range [addr, end) through the DMA window: the
// host memory of the enabled entry that holds addr, if the whole range lies
// inside it. On success the engine holds the entry until the command ends.
func (e *Engine) busSpan(addr, end uint64) ([]byte, abi.Status) {
	regs := e.dev.regs
	for i := range abi.WindowSlots {
		w := abi.WindowRegs(i)
		// A first look, without a hold: is this the entry? Most entries
		// are not, and looking costs the engine no store.
		if regs.Load(w+abi.RegWinEnable) != 1 || !startsIn(regs, w, addr, end) {
			continue
		}
		if bit := uint64(1) << i; e.held&bit == 0 {
			e.held |= bit
			// (1) This store announces the hold; the driver's load of
			// RegDMAHeld in waitUnheld pairs with it.
			regs.Store(e.bank+abi.RegDMAHeld, e.held)
			// (2) Look again, now that the hold is visible: the entry
			// may have been disabled, or disabled and rewritten, since the
			// first look. This load pairs with the driver's store of
			// RegWinEnable in register and unregister.
			if regs.Load(w+abi.RegWinEnable) != 1 || !startsIn(regs, w, addr, end) {
				e.held &^= bit
				regs.Store(e.bank+abi.RegDMAHeld, e.held)
				continue
			}
		}
		// Held and enabled: the driver leaves the entry's fields alone
		// until the hold is released, so these loads agree with the look.
		base, size := regs.Load(w+abi.RegWinBus), regs.Load(w+abi.RegWinSize)
		if end-base > size {
			return nil, abi.StatusOutOfRange // starts in the entry, runs past its end
		}
		if testHookHeld != nil {
			testHookHeld(e.id, i)
		}
		host := hostBytes(regs.Load(w+abi.RegWinHost), size)
		return host[addr-base : end-base : end-base], abi.StatusOK
	}
	return nil, abi.StatusNoDMA
}

// ANCHOR_END: busspan

// startsIn reports whether the range [addr, end) starts inside the entry
// whose registers are at w: its first byte is in the entry, or it is empty
// and sits at the entry's end. (addr-base wraps to a huge value when addr
// is below base, so one comparison covers both sides.)
func startsIn(regs *Registers, w, addr, end uint64) bool {
	off := addr - regs.Load(w+abi.RegWinBus)
	size := regs.Load(w + abi.RegWinSize)
	return off < size || (off == size && addr == end)
}

// releaseDMA drops every hold the command that just ended took. The
// command's last access to host memory comes before this store in the
// engine's program order, and the driver's load in waitUnheld pairs with
// it: a driver that sees the bit clear may unmap.
func (e *Engine) releaseDMA() {
	if e.held != 0 {
		e.held = 0
		e.dev.regs.Store(e.bank+abi.RegDMAHeld, 0)
	}
}
