package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"softgpu/stage5-vm/abi"
	"softgpu/stage5-vm/internal/spin"
)

// Virtual memory, the device-wide half: the page-table pool, the table of
// contexts the device reads, the driver's own context, and the TLB
// invalidation handshake. context.go has a context's own operations.
//
// Device memory is split in two: the data memory below, which Alloc hands
// out, and the page-table pool at the top, which no context maps.
//
// The driver's own context, context 0, maps device data memory and the whole
// bus range at their physical addresses, read-write, with the largest pages
// that fit (1 GiB and 2 MiB for data memory, 1 GiB for the bus): the
// kernel's linear map, in the manner of a real driver's. So every address
// the earlier API handed out — device offsets from Alloc, bus addresses of
// pinned memory — is a virtual address in context 0 that translates to
// itself, and every command still goes through the MMU. Context 0 is not
// sticky: a command with a bad address fails alone.

// poolShare is the fraction of device memory kept for page tables: 1/16,
// at least minPool. A context that maps 64 MiB in 4 KiB pages needs about
// 130 KiB of tables.
const (
	poolShare = 16
	minPool   = 32 << 10
)

// ErrContext reports a context the driver cannot make or use: none left, a
// closed one, a bad page size or address.
var ErrContext = errors.New("softgpu: bad context")

// ErrContextFaulted reports that a context has faulted and its later
// commands fail until the fault is cleared; a *FaultError wraps it.
var ErrContextFaulted = errors.New("softgpu: context faulted")

// vm is the driver's virtual-memory state.
type vm struct {
	pool     tablePool
	dataSize uint64 // device memory below the pool

	// mu guards contexts.
	mu       sync.Mutex
	contexts [abi.MaxContexts]*Context

	// tableMu serialises the edits of page tables that recompute fragment
	// fields (fragment.go): each reads a window's entries and writes
	// fields back, and must not do so around another's edit.
	tableMu sync.Mutex

	// invalMu serialises invalidation requests: one at a time is in the
	// registers. invalGen is the last generation stored to RegInvalGen.
	invalMu  sync.Mutex
	invalGen uint64

	// freeMu guards deferred and deferredPA: frees waiting for the work
	// queued before them (deferred.go).
	freeMu     sync.Mutex
	deferred   []deferredFree
	deferredPA map[uint64]bool
	// deferredAdds counts the frees put on deferred: each adds one after
	// its append, holding freeMu; allocMemory's wait loads it without
	// freeMu, to see a free that joined after its copy.
	deferredAdds atomic.Uint64
}

// initVM splits device memory into data and the page-table pool, and makes
// context 0 with its tables.
func (d *Driver) initVM() error {
	pool := max(d.memSize/poolShare, minPool) &^ (1<<abi.PageShift - 1)
	if pool+AllocBase >= d.memSize {
		return fmt.Errorf("%w: %d bytes of device memory leave no room beside the %d-byte page-table pool", ErrNoDevice, d.memSize, pool)
	}
	d.vm.dataSize = d.memSize - pool
	d.vm.pool = tablePool{alloc: NewRangeAllocator(d.vm.dataSize, d.memSize), mem: d.hw.Memory()}
	d.vm.deferredPA = map[uint64]bool{}
	d.vm.invalGen = d.regs.Load(abi.RegInvalGen) // a device an earlier driver used may have moved it
	root, err := d.vm.pool.table(abi.RootBytes)
	if err != nil {
		return err
	}
	// The kernel's linear map: data memory, then the bus range.
	if _, err := d.mapRange(root, 0, 0, d.vm.dataSize, abi.Page1G, true, false); err != nil {
		return err
	}
	if _, err := d.mapRange(root, abi.BusBase, abi.BusBase, abi.BusSize, abi.Page1G, true, true); err != nil {
		return err
	}
	c := &Context{d: d, id: 0, root: root, mappings: map[uint64]*mapping{}}
	d.vm.contexts[0] = c
	d.enableContext(c, false)
	// Every other context is disabled until the driver makes it: an
	// earlier driver's contexts are not ours.
	for id := abi.Context(1); id < abi.MaxContexts; id++ {
		d.regs.Store(abi.ContextRegs(id)+abi.RegCtxFlags, 0)
	}
	d.invalidate(0, 0, 0) // and no engine keeps a translation of theirs
	return nil
}

// enableContext points the device's context table at c's root and enables
// it, acknowledging any fault an earlier context with the same id left.
func (d *Driver) enableContext(c *Context, sticky bool) {
	r := abi.ContextRegs(c.id)
	d.regs.Store(r+abi.RegCtxRoot, c.root)
	d.regs.Store(r+abi.RegCtxFaultAck, d.regs.Load(abi.ContextStatusRegs(c.id)+abi.RegCtxFaults))
	flags := uint64(abi.CtxEnabled)
	if sticky {
		flags |= abi.CtxSticky
	}
	// Stored last: an engine that sees the context enabled finds its root.
	d.regs.Store(r+abi.RegCtxFlags, flags)
}

// ANCHOR: invalidate

// invalidate asks every engine to drop its TLB entries for [va, va+size) of
// context ctx (size 0: the whole address space) and returns once none can
// use them any more: each has acknowledged — at its next safe point, where
// it holds no translation (device/mmu.go) — or is idle, asleep, or
// stopped.
//
// The idle and asleep cases need the order argued in device/mmu.go: this
// goroutine stores RegInvalGen, then loads RegEngineState; the engine
// stores EngineRunning before its next command, then loads RegInvalGen
// before translating. Reading EngineIdle or EngineAsleep therefore proves
// the engine will see this generation before it uses any entry — so an
// idle engine is never waited for, and a sleeping one never woken, just to
// acknowledge.
func (d *Driver) invalidate(ctx abi.Context, va, size uint64) {
	d.vm.invalMu.Lock()
	defer d.vm.invalMu.Unlock()
	d.regs.Store(abi.RegInvalCtx, uint64(ctx))
	d.regs.Store(abi.RegInvalVA, va)
	d.regs.Store(abi.RegInvalSize, size)
	d.vm.invalGen++
	gen := d.vm.invalGen
	d.regs.Store(abi.RegInvalGen, gen) // publishes the request above; the engines' loads in checkInval pair with it
	for e := range abi.Engine(abi.NumEngines) {
		status := abi.EngineStatusPage(e)
		yield := spin.NewCadence(d.yieldEvery)
		for polls := 1; ; polls++ {
			if d.regs.Load(status+abi.RegInvalAck) == gen {
				break
			}
			if s := d.regs.Load(status + abi.RegEngineState); s == abi.EngineIdle || s == abi.EngineAsleep || s == abi.EngineStopped {
				break
			}
			if yield.Due(polls) {
				runtime.Gosched()
			}
		}
	}
}

// ANCHOR_END: invalidate

// DataSize reports the bytes of device memory the allocator hands out: all
// of it but the page-table pool.
func (d *Driver) DataSize() uint64 { return d.vm.dataSize }

// DefaultContext returns the driver's own context, context 0.
func (d *Driver) DefaultContext() *Context { return d.vm.contexts[0] }

// TLBStats counts what the engines' TLBs did since the device opened.
type TLBStats struct {
	Hits, Misses, WalkReads uint64
}

// TLBStats returns the engines' TLB counters, summed. An engine publishes
// its counts when it goes idle and at a fault, so a busy engine's are a
// little behind.
func (d *Driver) TLBStats() TLBStats {
	var s TLBStats
	for e := range abi.Engine(abi.NumEngines) {
		page := abi.EngineStatusPage(e)
		s.Hits += d.regs.Load(page + abi.RegTLBHits)
		s.Misses += d.regs.Load(page + abi.RegTLBMisses)
		s.WalkReads += d.regs.Load(page + abi.RegTLBWalkReads)
	}
	return s
}
