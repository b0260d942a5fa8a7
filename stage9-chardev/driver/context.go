package driver

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"softgpu/stage9-chardev/abi"
)

// A context is an address space: its own page tables, its own virtual
// addresses, and an id the commands that run in it carry. A context the
// driver makes for a user (NewContext) maps only what the user allocated or
// mapped in it, so no command of it can reach another context's memory —
// nor any device memory the driver did not map for it.
//
// A user context is sticky: after its first fault every later command of
// it fails with abi.StatusCtxFaulted, until ClearFault. That is what real
// GPUs do with a context whose work took an MMU fault — its later work
// cannot be trusted to see the memory it expected — and it stops a faulting
// program from running on as if nothing happened. The error says where the
// fault was (Err).
//
// Virtual addresses of a user context start at userVABase (2 MiB): address
// 0 and the first pages stay unmapped, so a zero pointer faults.

const (
	userVABase = 2 << 20
	userVAEnd  = 1 << 47
)

// Context is one address space.
type Context struct {
	d    *Driver
	id   abi.Context
	root uint64 // device PA of its root table

	// mu guards va, nextVA, mappings, closed, channels and tables, and the
	// context's tables against a concurrent map and unmap (pagetable.go).
	mu       sync.Mutex
	tables   uint64     // pages of page-table pool its tables take, root included (TablePages)
	va       *Allocator // its virtual addresses (nil for context 0, which maps everything)
	nextVA   uint64     // where the next VA search starts: next fit (deferred.go)
	mappings map[uint64]*mapping
	closed   bool
	channels []*Channel // opened for it by NewChannel (runlist.go), closed with it

	resetsBase uint64 // RegCtxResets of its id when it was made: Resets counts from there (guilty.go)
	// idFreed is set by Close, under vm.mu, as it gives the id back;
	// Resets reads it without the lock, after the count (guilty.go).
	idFreed atomic.Bool
}

// mapping is one range of a context's address space.
type mapping struct {
	va, size uint64
	runs     []pageRun
	pa       uint64  // device memory the context owns (Alloc), or the bus address (Map)
	pinned   *Pinned // the pinned region it maps, for Map
}

// FaultError is a context's fault, as the device recorded it.
type FaultError struct {
	Context abi.Context
	VA      uint64
	Fault   abi.Fault
	Count   uint64 // faults since the context's last ClearFault
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("softgpu: context %d faulted at VA %#x: %v (%d fault(s) since cleared)", e.Context, e.VA, e.Fault, e.Count)
}

func (e *FaultError) Unwrap() error { return ErrContextFaulted }

// NewContext makes an address space with nothing mapped in it.
func (d *Driver) NewContext() (*Context, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	d.vm.mu.Lock()
	defer d.vm.mu.Unlock()
	id := abi.Context(slices.IndexFunc(d.vm.contexts[1:], func(c *Context) bool { return c == nil }) + 1)
	if id == 0 {
		return nil, fmt.Errorf("%w: all %d contexts are in use", ErrContext, abi.MaxContexts)
	}
	root, err := d.vm.pool.table(abi.RootBytes)
	if err != nil {
		return nil, err
	}
	c := &Context{d: d, id: id, root: root, tables: tablePages(abi.RootBytes), va: NewRangeAllocator(userVABase, userVAEnd), mappings: map[uint64]*mapping{},
		resetsBase: d.regs.Load(abi.ContextStatusRegs(id) + abi.RegCtxResets)} // before it is enabled: no command of it has run
	d.vm.contexts[id] = c
	d.enableContext(c, true)
	return c, nil
}

// ID returns the context's id, the one its commands carry.
func (c *Context) ID() abi.Context { return c.id }

// TablePages reports how much of the page-table pool the context's tables
// take, in pages of 4 KiB (abi.PageShift), its root included: more after a
// map that needed new tables, less after an unmap that emptied some, none
// once Close has given them back. Tables an unmap leaves out of reuse for
// a hung engine (Unmap) are not the context's any more and are not
// counted. The daemon charges a client's quota by it (stage 9's
// server/quota.go). The count is guarded by the context's mu, so it is
// exact between one map or unmap and the next.
func (c *Context) TablePages() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tables
}

// pageFor returns the page size to map size bytes with: page if given,
// else the largest of 4 KiB, 64 KiB and 2 MiB that size fills — the largest
// the alignment will allow, as real drivers choose.
func pageFor(size uint64, page abi.PageSize) (abi.PageSize, error) {
	switch page {
	case 0:
		for _, p := range []abi.PageSize{abi.Page2M, abi.Page64K} {
			if size >= uint64(p) {
				return p, nil
			}
		}
		return abi.Page4K, nil
	case abi.Page4K, abi.Page64K, abi.Page2M:
		return page, nil
	}
	return 0, fmt.Errorf("%w: page size %d is not 4 KiB, 64 KiB or 2 MiB", ErrContext, uint64(page))
}

// ANCHOR: alloc

// Alloc reserves size bytes of device memory and maps them at a new VA of
// the context, with pages of the given size (0: the largest that fits) —
// the memory aligned for them — and returns the VA. In context 0 it is the
// driver's Alloc: the linear map already maps it, at its own address.
//
// The memory reaches the context zeroed. A context is a client's, and
// the memory may have been another client's, freed with its bytes in it:
// handed out as found, a stranger read another client's secrets with one
// COPY (TestAStrangerCannotReadAnotherClientsFreedDeviceMemory). Real
// drivers do the same on the device's own engines: amdgpu allocates
// every GEM buffer's VRAM cleared (since 2024), and NVIDIA's resource
// manager scrubs freed memory with a copy engine before its allocator
// hands it out again (mem_scrub.c). Here the driver clears it with the
// CPU, once the free has passed every command queued before it
// (deferred.go), so no engine writes it any more.
func (c *Context) Alloc(size uint64, page abi.PageSize) (uint64, error) {
	if c.id == 0 {
		return c.d.Alloc(size)
	}
	page, err := pageFor(size, page)
	if err != nil {
		return 0, err
	}
	if c.d.closed.Load() {
		return 0, ErrClosed
	}
	align := fragmentAlign(size, page) // for fragments, as well as pages
	pa, err := c.d.allocMemory(size, func() (uint64, error) { return c.d.alloc.AllocAligned(size, align) })
	if err != nil {
		return 0, err
	}
	// All of it: the allocator rounds size up to align, and the mapping
	// covers every page of that, past size — cleared only to size, the
	// rest of the last page still held the last owner's bytes
	// (TestAStrangerCannotReadAnotherClientsFreedMemoryPastItsAllocSize).
	clear(c.d.hw.Memory()[pa : pa+(size+align-1)&^(align-1)])
	va, err := c.mapAt(pa, size, page, nil)
	if err != nil {
		c.d.alloc.Free(pa)
		return 0, err
	}
	return va, nil
}

// ANCHOR_END: alloc

// Map maps pinned memory p into the context, with pages up to the given
// size (0: the largest that fits), and returns its VA. In context 0 every
// pinned region is mapped already, at its bus address.
func (c *Context) Map(p *Pinned, page abi.PageSize) (uint64, error) {
	if p == nil || len(p.bytes) == 0 {
		return 0, ErrBadHostFree
	}
	if c.id == 0 {
		return p.bus, nil
	}
	page, err := pageFor(uint64(len(p.mapping)), page)
	if err != nil {
		return 0, err
	}
	return c.mapAt(p.bus, uint64(len(p.mapping)), page, p)
}

// mapAt maps size bytes at physical address pa at a fresh VA, aligned for
// page.
func (c *Context) mapAt(pa, size uint64, page abi.PageSize, pinned *Pinned) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("%w: context %d is closed", ErrContext, c.id)
	}
	va, err := c.va.AllocAlignedFrom(size, vaAlign(pa, size, page), c.nextVA) // congruent with pa for fragments (fragment.go); next-fit (deferred.go)
	if err != nil {
		return 0, fmt.Errorf("%w: no virtual addresses left: %w", ErrContext, err)
	}
	rounded := (size + uint64(page) - 1) &^ (uint64(page) - 1)
	runs, err := c.d.mapRange(c.root, va, pa, rounded, page, true, pinned != nil, &c.tables)
	if err != nil {
		// mapRange cleared what it mapped; the tables it made go too.
		empty := c.d.unlinkEmptyTables(c.root, va, rounded, &c.tables)
		c.d.invalidate(c.id, va, rounded)
		c.d.vm.pool.freeTables(empty)
		c.va.Free(va)
		return 0, err
	}
	c.nextVA = va + rounded
	m := &mapping{va: va, size: rounded, runs: runs, pa: pa, pinned: pinned}
	c.mappings[va] = m
	if pinned != nil {
		c.d.pinMu.Lock()
		pinned.mapped = append(pinned.mapped, contextVA{c, va})
		c.d.pinMu.Unlock()
	}
	return va, nil
}

// ANCHOR: unmap

// Unmap takes the mapping at va out of the context, and, for memory the
// context allocated, gives it back. It clears the entries, invalidates
// every engine's TLB for the range and waits for them (vm.go): no command
// can reach the memory afterwards, through an old translation or a new
// one. The VA and the memory are handed out again only once the commands
// queued before the Unmap have run (deferred.go).
func (c *Context) Unmap(va uint64) error {
	if c.id == 0 {
		return c.d.Free(va)
	}
	c.mu.Lock()
	m, ok := c.mappings[va]
	if ok {
		delete(c.mappings, va)
	}
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: no mapping at %#x in context %d", ErrBadFree, va, c.id)
	}
	_, err := c.unmap(m)
	return err
}

// ANCHOR_END: unmap

// Free is Unmap, by the name Alloc's caller expects.
func (c *Context) Free(va uint64) error { return c.Unmap(va) }

// unmap removes m, which is out of the mappings already. Its addresses
// and memory wait for the work queued before it (deferred.go). If an
// engine did not acknowledge the invalidation within its bound (vm.go),
// the memory m maps and the tables the unmap emptied are kept from reuse
// for good — a hung engine may still hold a translation into the one or be
// walking the other — and the error is returned; the VA comes back as
// usual, since an engine that missed a generation drops every cached
// translation before it translates again. A pinned region's window entry
// is guarded by its DMA holds (HostFree) and needs nothing more. The
// Release is signalled when the deferred free is given back (release.go).
func (c *Context) unmap(m *mapping) (*Release, error) {
	queued := c.d.queuedWorkOf(c) // before the entries go: the commands that might name m
	c.mu.Lock()
	c.d.unmapRange(c.root, m.runs)
	empty := c.d.unlinkEmptyTables(c.root, m.va, m.size, &c.tables)
	c.mu.Unlock()
	err := c.d.invalidate(c.id, m.va, m.size) // after this, no engine translates into m, nor walks a table unlinked above
	if err == nil {
		c.d.vm.pool.freeTables(empty)
	}
	f := deferredFree{queued: queued, ctx: c, va: m.va, back: new(Release)}
	if m.pinned == nil && err == nil {
		f.pa = m.pa
	}
	c.d.deferFree(f)
	if m.pinned == nil {
		return f.back, err
	}
	c.d.pinMu.Lock()
	m.pinned.mapped = slices.DeleteFunc(m.pinned.mapped, func(x contextVA) bool { return x.ctx == c && x.va == m.va })
	c.d.pinMu.Unlock()
	return f.back, err
}

// Err returns the context's fault as a *FaultError if it has faulted since
// it was made or last cleared, or nil.
func (c *Context) Err() error {
	regs, s := c.d.regs, abi.ContextStatusRegs(c.id)
	count := regs.Load(s+abi.RegCtxFaults) - regs.Load(abi.ContextRegs(c.id)+abi.RegCtxFaultAck)
	if count == 0 {
		return nil
	}
	return &FaultError{Context: c.id, VA: regs.Load(s + abi.RegCtxFaultVA), Fault: abi.Fault(regs.Load(s + abi.RegCtxFaultInfo)), Count: count}
}

// ClearFault acknowledges the context's faults: its commands run again.
func (c *Context) ClearFault() {
	c.d.regs.Store(abi.ContextRegs(c.id)+abi.RegCtxFaultAck, c.d.regs.Load(abi.ContextStatusRegs(c.id)+abi.RegCtxFaults))
}

// Close closes the context's channels, unmaps everything the context
// maps, frees what it allocated and its tables, and gives its id back. Commands of it still queued fail with
// abi.StatusBadContext. Context 0 cannot be closed. If an engine does not
// answer within its bound (bound.go), Close still closes the context, keeps
// what that engine may still reach out of reuse, and returns the error.
func (c *Context) Close() error {
	if c.id == 0 {
		return fmt.Errorf("%w: the driver's own context cannot be closed", ErrContext)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	chs := slices.Clone(c.channels)
	c.mu.Unlock()
	var err error
	for _, ch := range chs { // off the runlists first: no command of the context runs after this
		err = errors.Join(err, ch.Close())
	}
	err = errors.Join(err, c.d.freeContextManaged(c)) // managed.go
	c.mu.Lock()
	ms := make([]*mapping, 0, len(c.mappings))
	for _, m := range c.mappings {
		ms = append(ms, m)
	}
	clear(c.mappings)
	c.mu.Unlock()
	for _, m := range ms {
		_, uerr := c.unmap(m)
		err = errors.Join(err, uerr)
	}
	c.d.regs.Store(abi.ContextRegs(c.id)+abi.RegCtxFlags, 0)
	if ierr := c.d.invalidate(c.id, 0, 0); ierr != nil {
		// A hung engine may be in the middle of a walk of these tables,
		// and may hold the context's id: both stay out of reuse.
		return errors.Join(err, ierr)
	}
	c.d.freeTables(c.root, abi.RootLevel)
	c.mu.Lock()
	c.tables = 0
	c.mu.Unlock()
	c.d.vm.mu.Lock()
	c.idFreed.Store(true) // before the id is free: see Resets (guilty.go)
	c.d.vm.contexts[c.id] = nil
	c.d.vm.mu.Unlock()
	return err
}

// contextVA is a place a pinned region is mapped.
type contextVA struct {
	ctx *Context
	va  uint64
}

// addChannel adds ch to the context's channels, unless the context is
// closed (or the driver is): then it reports false.
func (c *Context) addChannel(ch *Channel) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.d.closed.Load() {
		return false
	}
	c.channels = append(c.channels, ch)
	return true
}

// removeChannel takes ch off the context's channels.
func (c *Context) removeChannel(ch *Channel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels = slices.DeleteFunc(c.channels, func(x *Channel) bool { return x == ch })
}
