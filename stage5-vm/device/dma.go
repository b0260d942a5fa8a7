package device

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"softgpu/stage5-vm/abi"
	"softgpu/stage5-vm/internal/spin"
	"softgpu/stage5-vm/mmio"
)

// This file is the device's DMA window (the layout is in abi/dma.go): how
// an engine turns a bus address into host memory, and the hold that keeps
// that memory mapped while a command touches it.
//
// Who writes what:
//
//	RegWinHost, RegWinBus, RegWinSize, RegWinEnable   the driver, per entry
//	RegDMAHeld                                        the engine, per engine
//	Engine.held                                       the engine's private copy of its RegDMAHeld
//	Device.host                                       RegisterHost and UnregisterHost
//
// The host regions. A window entry names host memory by address, an
// integer the driver wrote; the device never makes it a pointer. It keeps
// its own table of the regions the driver handed it (RegisterHost, the
// IOMMU's part in this model) as slices, and an entry is usable only if the
// host range it names lies inside one of them. A bogus entry is a bad
// command's StatusNoDMA, not a wild pointer in the device's process.
//
// Invariants:
//   - an engine touches the host memory of entry i only while bit i of its
//     RegDMAHeld is set, and only after it has read RegWinEnable = 1 with
//     the bit already set;
//   - an engine clears its bits only when a command is done (releaseDMA,
//     deferred by execute): a command holds what it resolved until it ends;
//   - the driver rewrites an entry only after it has stored
//     RegWinEnable = 0 and then seen bit i clear in every engine's
//     RegDMAHeld;
//   - UnregisterHost returns only when no engine can touch the region.
//
// Why that makes unmapping safe. Holding and unregistering are each a store
// followed by a load of the other side's word, as in Dekker's algorithm:
//
//	engine: hold entry i (busRun)         driver: unregister entry i
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
// the engine use an old mapping while the driver finds the bit clear.
// UnregisterHost makes the same argument with the region table in place of
// RegWinEnable: it publishes a table without the region, then waits until
// no engine holds an entry; an engine loads the table after its hold is
// visible.
//
// The choice this makes for a region freed while commands name it: a
// command already holding the entry runs to its end and the driver waits for
// it; a command that reaches the entry after the driver disabled it fails
// with abi.StatusNoDMA. Nothing is cut short in the middle of a copy.

// hostRegion is a region of host memory the driver registered for DMA.
type hostRegion struct {
	addr uint64 // its host address, the name window entries use
	mem  []byte
}

// ErrHostRegion reports a RegisterHost or UnregisterHost the device cannot
// honour.
var ErrHostRegion = errors.New("softgpu: bad host region")

// testHookHeld, if set, runs each time an engine has taken a hold on a
// window entry and before it touches the entry's memory: tests use it to
// stop an engine in the middle of a command. Set it before Open, clear it
// after Close.
var testHookHeld func(e abi.Engine, entry int)

// RegisterHost makes mem reachable by DMA: a window entry may name any
// range inside it, by its host address. mem must stay mapped, and must not
// overlap a region already registered, until UnregisterHost.
func (d *Device) RegisterHost(mem []byte) error {
	if len(mem) == 0 {
		return fmt.Errorf("%w: an empty region", ErrHostRegion)
	}
	r := hostRegion{addr: addressOf(mem), mem: mem}
	d.hostMu.Lock()
	defer d.hostMu.Unlock()
	old := d.regions()
	for _, o := range old {
		if r.addr < o.addr+uint64(len(o.mem)) && o.addr < r.addr+uint64(len(mem)) {
			return fmt.Errorf("%w: [%#x, +%d) overlaps a registered region", ErrHostRegion, r.addr, len(mem))
		}
	}
	table := append(slices.Clone(old), r)
	d.host.Store(&table)
	return nil
}

// UnregisterHost takes mem out of the device's reach. It returns once no
// engine can touch it any more — every command that held a window entry
// when the region left the table has ended — so the caller may unmap it.
func (d *Device) UnregisterHost(mem []byte) error {
	if len(mem) == 0 {
		return fmt.Errorf("%w: an empty region", ErrHostRegion)
	}
	addr := addressOf(mem)
	d.hostMu.Lock()
	old := d.regions()
	k := slices.IndexFunc(old, func(r hostRegion) bool { return r.addr == addr && len(r.mem) == len(mem) })
	if k < 0 {
		d.hostMu.Unlock()
		return fmt.Errorf("%w: [%#x, +%d) is not registered", ErrHostRegion, addr, len(mem))
	}
	table := slices.Delete(slices.Clone(old), k, k+1)
	d.host.Store(&table) // (3'): from here on an engine that takes a hold will not find it
	d.hostMu.Unlock()
	d.awaitNoHolds() // (4'): wait out the engines that took a hold before
	return nil
}

// regions returns the current table of host regions: an immutable
// snapshot, replaced whole on every change.
func (d *Device) regions() []hostRegion {
	if p := d.host.Load(); p != nil {
		return *p
	}
	return nil
}

// awaitNoHolds waits until no engine holds any window entry. The wait is
// one command long at most; a stopped engine holds nothing. It yields on
// the default cadence in time (internal/spin).
func (d *Device) awaitNoHolds() {
	yield := spin.NewCadence(0)
	for polls := 1; ; polls++ {
		var held uint64
		for e := range abi.Engine(abi.NumEngines) {
			held |= d.regs.Load(abi.EngineStatusPage(e) + abi.RegDMAHeld)
		}
		if held == 0 {
			return
		}
		if yield.Due(polls) {
			runtime.Gosched()
		}
	}
}

// ANCHOR: busrun

// busRun resolves the bus range [addr, addr+size) through the DMA window:
// the host memory of the enabled entry that holds addr, if the whole range
// lies inside it and the entry names a registered host region. On success
// the engine holds the entry until the command ends. A bus range is one
// run: an entry maps contiguous host memory.
func (e *Engine) busRun(addr, size uint64) ([]byte, abi.Status) {
	regs := e.regs
	end := addr + size
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
			// RegDMAHeld pairs with it.
			regs.Store(e.statusPage+abi.RegDMAHeld, e.held)
			// (2) Look again, now that the hold is visible: the entry
			// may have been disabled, or disabled and rewritten, since the
			// first look. This load pairs with the driver's store of
			// RegWinEnable.
			if regs.Load(w+abi.RegWinEnable) != 1 || !startsIn(regs, w, addr, end) {
				e.held &^= bit
				regs.Store(e.statusPage+abi.RegDMAHeld, e.held)
				continue
			}
		}
		// Held and enabled: the driver leaves the entry's fields alone
		// until the hold is released, so these loads agree with the look.
		base, entrySize := regs.Load(w+abi.RegWinBus), regs.Load(w+abi.RegWinSize)
		if end-base > entrySize {
			return nil, abi.StatusOutOfRange // starts in the entry, runs past its end
		}
		host, ok := e.dev.hostRange(regs.Load(w+abi.RegWinHost), entrySize)
		if !ok {
			return nil, abi.StatusNoDMA // the entry names memory the device was never given
		}
		if testHookHeld != nil {
			testHookHeld(e.id, i)
		}
		return host[addr-base : end-base : end-base], abi.StatusOK
	}
	return nil, abi.StatusNoDMA
}

// ANCHOR_END: busrun

// hostRange returns the size bytes of registered host memory at host
// address addr, if they lie inside one registered region.
func (d *Device) hostRange(addr, size uint64) ([]byte, bool) {
	for _, r := range d.regions() {
		if off := addr - r.addr; off < uint64(len(r.mem)) && size <= uint64(len(r.mem))-off {
			return r.mem[off : off+size : off+size], true
		}
	}
	return nil, false
}

// startsIn reports whether the range [addr, end) starts inside the entry
// whose registers are at w: its first byte is in the entry, or it is empty
// and sits at the entry's end. (addr-base wraps to a huge value when addr
// is below base, so one comparison covers both sides.)
func startsIn(regs *mmio.Registers, w, addr, end uint64) bool {
	off := addr - regs.Load(w+abi.RegWinBus)
	size := regs.Load(w + abi.RegWinSize)
	return off < size || (off == size && addr == end)
}

// releaseDMA drops every hold the command that just ended took. The
// command's last access to host memory comes before this store in the
// engine's program order, and the driver's load of RegDMAHeld pairs with
// it: a driver that sees the bit clear may rewrite the entry.
func (e *Engine) releaseDMA() {
	if e.held != 0 {
		e.held = 0
		e.regs.Store(e.statusPage+abi.RegDMAHeld, 0)
	}
}

// hostTable is the device's table of registered host regions.
type hostTable struct {
	hostMu sync.Mutex                   // serialises changes; the engines read without it
	host   atomic.Pointer[[]hostRegion] // the current snapshot
}
