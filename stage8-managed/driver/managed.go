package driver

import (
	"container/list"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/trace"
)

// Managed memory, the driver's half: allocations that the host and the
// device address by the same pointer, whose pages move to where they are
// used. The device's half is a fault (device/fault.go); the fault handler
// that answers it is faults.go.
//
// An allocation is a pinned host region (pinned.go) and a range of the
// context's addresses with one 4 KiB leaf entry per page. Each page is in
// one of three places:
//
//	pageHost    the data is in the host region; the entry is abi.ManagedPTE,
//	            so a device access faults, and the handler migrates it
//	pageDevice  the data is in a frame of device memory; the entry maps it
//	pageRemote  the data stays in the host region, and the entry maps it
//	            there through the DMA window (a host page): the thrashing
//	            guard's answer to a page that will not stay put
//
// The host reaches the data through Bytes. A host access to a page on the
// device cannot be trapped here (see Sync): the host must call Sync, or
// Prefetch to the host, before it reads what the device wrote or writes a
// page the device may have. Device accesses need nothing: they fault.
//
// Every move of a page away from the device clears its entry first and
// invalidates the engines' TLBs (vm.go) before the data is copied: after
// the invalidation no engine can write the frame, so the copy is whole.
// A move to the device writes the frame first and the entry last: an entry
// that was not valid is in no TLB, so nothing needs invalidating.
//
// State, guarded by um.mu: every page's place, frame and counters; the
// free frames; the blocks with pages on the device, in the order the
// eviction policy's hand passes them (evict.go); the allocations of each
// context.

// ErrManaged reports a bad use of managed memory: a size or range outside
// the allocation, a context that cannot have it, a double Free.
var ErrManaged = errors.New("softgpu: bad managed memory")

// MaxManaged is the largest managed allocation: 1 GiB.
const MaxManaged = 1 << 30

// Location is where a Prefetch moves pages.
type Location int

const (
	ToDevice Location = iota + 1
	ToHost
)

func (l Location) String() string {
	switch l {
	case ToDevice:
		return "device"
	case ToHost:
		return "host"
	}
	return fmt.Sprintf("Location(%d)", int(l))
}

// Prefetch is the fault handler's prefetch policy.
type Prefetch int

const (
	// PrefetchWindow migrates, with each faulting page, the pages after
	// it up to a window of Config.PrefetchPages (default 16) pages.
	PrefetchWindow Prefetch = iota
	// PrefetchOff migrates the faulting pages alone.
	PrefetchOff
	// PrefetchAdaptive starts with the window and doubles it, up to
	// maxAdaptive pages, while an allocation's faults follow each other
	// in address order; a fault anywhere else starts it again.
	PrefetchAdaptive
	// PrefetchDensity is UVM's prefetcher: per 2 MiB block, a tree over
	// its pages; with each batch, the largest subtree around a faulting
	// page in which more than Config.PrefetchDensity percent of the pages
	// are resident or faulting moves whole (blocks.go).
	PrefetchDensity
)

func (p Prefetch) String() string {
	switch p {
	case PrefetchWindow:
		return "window"
	case PrefetchOff:
		return "off"
	case PrefetchAdaptive:
		return "adaptive"
	case PrefetchDensity:
		return "density"
	}
	return fmt.Sprintf("Prefetch(%d)", int(p))
}

// Defined reports whether p is a policy.
func (p Prefetch) Defined() bool { return p >= PrefetchWindow && p <= PrefetchDensity }

const (
	// DefaultPrefetchPages is the prefetch window: 16 pages, 64 KiB. A
	// fault costs a trip through the handler whatever it moves, so a
	// sequential access pays for one fault per 64 KiB rather than per
	// 4 KiB, and a random one moves at most 60 KiB it did not need. (The
	// window was sized before fault bursts, when 64 KiB took about as
	// long to copy as a trip with the handler still polling; no record
	// shows that trip alone now. In the managed record at 885b3ad a
	// 64 KiB copy that faults once, Managed/prefetch=16/size=64KiB, takes
	// 25 µs at the median, interrupt, migration and copy included.)
	DefaultPrefetchPages = 16
	// maxAdaptive is the widest window the adaptive policy grows to: 2 MiB.
	maxAdaptive = 512
	// frameChunk is how much device memory the frame pool takes from the
	// allocator at a time: 16 frames, so a window's pages land in
	// consecutive frames and the engine moves them as one run.
	frameChunk = 64 << 10
)

// The thrashing guard, after NVIDIA's UVM (uvm_perf_thrashing): a page
// that comes back to the device thrashThreshold times, each within
// thrashLapse of its previous move, is mapped remotely for thrashPin
// instead of moved. At the pin's end a timer takes the remote entry back
// (unpinExpired), as UVM's thrashing_unpin_pages does, so that the
// device's next access faults and the page may move again: a valid
// remote entry is never faulted on, and the page would stay remote for
// good (TestAThrashingPagesPinEnds).
const (
	DefaultThrashThreshold = 3
	thrashLapse            = 500_000    // 500 µs
	thrashPin              = 10_000_000 // 10 ms
)

// Where a page is.
const (
	pageHost uint8 = iota
	pageDevice
	pageRemote
)

// mpage is one page of a managed allocation.
type mpage struct {
	where     uint8
	frame     uint64 // its device frame, on the device
	pte       uint64 // the PA of its leaf entry
	moves     int    // moves to the device, each within thrashLapse of the last
	lastMove  uint64 // device clock at its last move either way
	pinnedTil uint64 // remote until then
	changed   uint64 // device clock when where last changed, or the allocation was made or synced: a fault recorded no later is stale
}

// Managed is an allocation of managed memory.
type Managed struct {
	d        *Driver
	ctx      *Context
	va, size uint64 // size as asked; the pages cover it rounded up to 4 KiB
	host     *Pinned
	pages    []mpage  // guarded by um.mu
	blocks   []mblock // each 2 MiB block of pages (evict.go); guarded by um.mu
	freed    bool     // guarded by um.mu
	next     int      // adaptive prefetch: the page after the last window
	window   int      // adaptive prefetch: the current window, in pages
}

// VA returns the allocation's address: in its context on the device, and
// the same number names Bytes()[0] to the program.
func (m *Managed) VA() uint64 { return m.va }

// Size returns the size asked for.
func (m *Managed) Size() uint64 { return m.size }

// Bytes returns the host's view of the allocation. A page the device has
// is stale here until Sync or a Prefetch to the host brings it back. After
// Free it returns nil, as a freed HostBuffer's Bytes does: the memory is
// unmapped, and a slice taken before Free must not be touched.
func (m *Managed) Bytes() []byte {
	m.d.um.mu.Lock()
	defer m.d.um.mu.Unlock()
	if m.freed {
		return nil
	}
	return m.host.bytes[:m.size]
}

// Context returns the context the allocation lives in.
func (m *Managed) Context() *Context { return m.ctx }

// um is the driver's managed-memory state.
type um struct {
	mu        sync.Mutex
	allocs    map[abi.Context][]*Managed // each context's, in VA order
	frames    []uint64                   // free device frames, popped from the end
	chunks    map[uint64]int             // frame-pool chunks, and how many of their frames are in use
	resident  list.List                  // blocks with pages on the device, the eviction hand at the front: blockRef (evict.go)
	policy    Prefetch
	window    int
	threshold int // moves that make a page thrash; 0: the guard is off
	density   int // PrefetchDensity's threshold, in percent
	eviction  Eviction
	stats     ManagedStats
	faulted   []faultedPage // serveBatch's scratch (blocks.go)
	spans     []pageSpan    // serveBlock's scratch
	occupied  []int         // densitySpan's scratch: prefix counts of a block's occupied pages
	pins      []pin         // remote pages until their pins end, in deadline order
	unpin     *time.Timer   // runs unpinExpired at the first pin's end; nil: not armed

	faults // the fault buffer and its handler (faults.go)
}

// ManagedStats counts what the fault handler and migrations did.
type ManagedStats struct {
	Faults     uint64 // fault records read
	Batches    uint64 // batches the handler served
	Duplicates uint64 // records naming a page another record of the batch named
	Migrations uint64 // blocks a batch moved pages of, each in one migration
	Stale      uint64 // records for a page that had moved since: the replay alone serves them
	Polled     uint64 // batches found by the handler's poll, not an interrupt
	ToDevice   uint64 // pages moved to the device, prefetched ones included
	Prefetched uint64 // of those, pages no fault named
	ToHost     uint64 // pages moved back to the host (Sync, Prefetch, eviction)
	Evicted    uint64 // of those, pages evicted to make room
	Evictions  uint64 // blocks evicted, each with one ranged invalidation
	Referenced uint64 // blocks the clock passed over because an engine had used them
	Thrashing  uint64 // pages the thrashing guard mapped remotely
	Remote     uint64 // pages mapped remotely for any reason: the guard, no frame free, or (stage 9) a pager that could not take them
	Replays    uint64 // replays stored
	Overflows  uint64 // records the device dropped because the buffer was full
}

// ManagedStats returns the counts since the driver was made.
func (d *Driver) ManagedStats() ManagedStats {
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	s := d.um.stats
	s.Overflows = d.regs.Load(abi.RegFaultOverflow) - d.um.overflowBase
	return s
}

// ANCHOR: allocmanaged

// AllocManaged allocates size bytes of managed memory in context c. Every
// page starts on the host, zeroed; the device's first access to each
// faults it over.
func (c *Context) AllocManaged(size uint64) (*Managed, error) {
	d := c.d
	if c.id == 0 {
		return nil, fmt.Errorf("%w: context 0 maps all of device memory at its own addresses; managed memory needs a context of its own", ErrManaged)
	}
	if size == 0 || size > MaxManaged {
		return nil, fmt.Errorf("%w: size %d is not in [1, %d]", ErrManaged, size, MaxManaged)
	}
	if d.closed.Load() {
		return nil, ErrClosed
	}
	rounded := (size + 1<<abi.PageShift - 1) &^ (1<<abi.PageShift - 1)
	host, err := d.HostAlloc(rounded)
	if err != nil {
		return nil, err
	}
	m := &Managed{d: d, ctx: c, size: size, host: host, pages: make([]mpage, rounded>>abi.PageShift),
		blocks: make([]mblock, (rounded>>abi.PageShift+blockPages-1)/blockPages)}
	d.reclaimFreed() // as Alloc does: a program of managed memory alone must get its freed VAs back too
	if err := c.mapManaged(m, rounded); err != nil {
		d.HostFree(host)
		return nil, err
	}
	if h := d.hooks.Mapped; h != nil {
		h()
	}
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	// Close may have run since mapManaged looked (Close marks the
	// context closed before it frees its managed memory, which waits for
	// um.mu): then it did not find m, and the context's tables — m's
	// entries among them — are Close's to free, and may be freed already,
	// so m's entries are not touched. Checked under um.mu, a Close still
	// to come finds m listed.
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		d.HostFree(host)
		return nil, fmt.Errorf("%w: context %d closed while managed memory was allocated in it", ErrContext, c.id)
	}
	m.forgetRecordsLocked() // records about an earlier owner of these addresses
	list := d.um.allocs[c.id]
	at, _ := slices.BinarySearchFunc(list, m.va, func(x *Managed, va uint64) int { return cmpU64(x.va, va) })
	d.um.allocs[c.id] = slices.Insert(list, at, m)
	return m, nil
}

// ANCHOR_END: allocmanaged

// mapManaged gives m addresses in c and a leaf entry per page, each
// abi.ManagedPTE, and notes where each entry is.
func (c *Context) mapManaged(m *Managed, rounded uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("%w: context %d is closed", ErrContext, c.id)
	}
	va, err := c.va.AllocAlignedFrom(rounded, managedVAAlign(rounded), c.nextVA) // next fit (deferred.go); aligned for big pages (blockframes.go)
	if err != nil {
		return fmt.Errorf("%w: no virtual addresses left: %w", ErrContext, err)
	}
	for i := range m.pages {
		pte, err := c.d.leafEntry(c.root, va+uint64(i)<<abi.PageShift)
		if err != nil {
			for _, p := range m.pages[:i] {
				storePTE(c.d.vm.pool.mem, p.pte, 0)
			}
			// The tables it made go too, as a failed mapAt's do: left
			// linked, they would stay out of the pool, empty, for the
			// context's life.
			empty := c.d.unlinkEmptyTables(c.root, va, rounded)
			c.d.invalidate(c.id, va, rounded)
			c.d.vm.pool.freeTables(empty)
			c.va.Free(va)
			return err
		}
		m.pages[i].pte = pte
		storePTE(c.d.vm.pool.mem, pte, abi.ManagedPTE)
	}
	m.va = va
	c.nextVA = va + rounded
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lookupManaged returns the allocation of context ctx that holds va, or nil.
// The caller holds um.mu.
func (d *Driver) lookupManaged(ctx abi.Context, va uint64) *Managed {
	list := d.um.allocs[ctx]
	i, found := slices.BinarySearchFunc(list, va, func(x *Managed, va uint64) int { return cmpU64(x.va, va) })
	if !found {
		i--
	}
	if i < 0 || i >= len(list) {
		return nil
	}
	if m := list[i]; va-m.va < uint64(len(m.pages))<<abi.PageShift {
		return m
	}
	return nil
}

// ANCHOR: migrate

// toDevice moves the pages [first, first+n) of m that are on the host to
// the device (or maps them remotely, if they thrash or no frame can be
// found), and returns how many it moved. The caller holds um.mu.
func (d *Driver) toDevice(m *Managed, first, n int) int {
	mem := d.hw.Memory()
	now := d.Now()
	moved := 0
	for i := first; i < first+n && i < len(m.pages); i++ {
		p := &m.pages[i]
		if p.where != pageHost {
			continue
		}
		if now-p.lastMove > thrashLapse {
			p.moves = 0
		}
		p.moves++
		p.lastMove = now
		if d.um.threshold > 0 && p.moves >= d.um.threshold {
			d.um.stats.Thrashing++
			d.mapRemote(m, i, now)
			continue
		}
		frame, ok := d.frame(m, first, first+n)
		if !ok {
			d.mapRemote(m, i, now) // device memory is full of pages that cannot move: use the host's
			continue
		}
		copy(mem[frame:frame+1<<abi.PageShift], m.host.bytes[uint64(i)<<abi.PageShift:])
		// The entry last: an engine that finds it valid reads a whole frame.
		storePTE(d.vm.pool.mem, p.pte, abi.MakePage(frame, abi.PTEPage4K, true, false))
		p.where, p.frame, p.changed = pageDevice, frame, now
		d.blockIn(m, i) // evict.go
		moved++
	}
	d.um.stats.ToDevice += uint64(moved)
	return moved
}

// mapRemote maps page i of m to its host page through the DMA window,
// until thrashPin from now (unpinExpired). The caller holds um.mu.
func (d *Driver) mapRemote(m *Managed, i int, now uint64) {
	p := &m.pages[i]
	storePTE(d.vm.pool.mem, p.pte, abi.MakePage(m.host.bus+uint64(i)<<abi.PageShift, abi.PTEPage4K, true, true))
	p.where, p.pinnedTil, p.changed = pageRemote, now+thrashPin, now
	d.um.stats.Remote++
	d.um.pins = append(d.um.pins, pin{m, i, p.pinnedTil}) // now never goes back: deadline order
	if d.um.unpin == nil {
		d.um.unpin = time.AfterFunc(thrashPin*time.Nanosecond, d.unpinExpired)
	}
}

// stopUnpin stops the pins' timer: Close calls it once the device has
// stopped, and an unpinExpired already on its way finds the driver
// closed.
func (d *Driver) stopUnpin() {
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if d.um.unpin != nil {
		d.um.unpin.Stop()
		d.um.unpin = nil
	}
	d.um.pins = nil
}

// pin is page i of m, mapped remotely until deadline (device clock).
type pin struct {
	m        *Managed
	i        int
	deadline uint64
}

// unpinExpired takes back the remote entries whose pins have ended: each
// becomes abi.ManagedPTE again, the page at home, its thrashing count
// reset, and the engines' TLBs invalidated for it, so that the device's
// next access faults and the handler decides afresh. A page taken back or
// pinned again since (its pinnedTil moved) is left alone. It runs on the
// timer mapRemote arms, and arms it again for the next pin.
func (d *Driver) unpinExpired() {
	u := &d.um
	u.mu.Lock()
	defer u.mu.Unlock()
	u.unpin = nil
	if d.closed.Load() {
		u.pins = nil
		return
	}
	now := d.Now()
	k := 0
	for ; k < len(u.pins) && u.pins[k].deadline <= now; k++ {
		pn := u.pins[k]
		p := &pn.m.pages[pn.i]
		if pn.m.freed || p.where != pageRemote || p.pinnedTil != pn.deadline {
			continue
		}
		storePTE(d.vm.pool.mem, p.pte, abi.ManagedPTE)
		p.where, p.changed, p.moves = pageHost, now, 0
		va := pn.m.va + uint64(pn.i)<<abi.PageShift
		d.refragment(pn.m.ctx.root, va, 1<<abi.PageShift) // as toHost: no neighbour's fragment may still span the page
		d.invalidate(pn.m.ctx.id, va, 1<<abi.PageShift)
	}
	u.pins = slices.Delete(u.pins, 0, k)
	if len(u.pins) > 0 {
		u.unpin = time.AfterFunc(time.Duration(u.pins[0].deadline-now), d.unpinExpired)
	}
}

// toHost moves the pages [first, first+n) of m that are on the device back
// to the host, and un-maps the remote ones whose pin has expired (all of
// them, if all is set). It clears their entries, invalidates once for the
// range, and only then copies. It returns how many it moved. The caller
// holds um.mu.
func (d *Driver) toHost(m *Managed, first, n int, all bool) int {
	last := min(first+n, len(m.pages))
	now := d.Now()
	var back []int
	for i := first; i < last; i++ {
		p := &m.pages[i]
		if p.where == pageDevice || p.where == pageRemote && (all || now >= p.pinnedTil) {
			storePTE(d.vm.pool.mem, p.pte, abi.ManagedPTE)
			back = append(back, i)
		}
	}
	if len(back) == 0 {
		return 0
	}
	lo, hi := back[0], back[len(back)-1]+1
	d.refragment(m.ctx.root, m.va+uint64(lo)<<abi.PageShift, uint64(hi-lo)<<abi.PageShift)
	d.invalidate(m.ctx.id, m.va+uint64(lo)<<abi.PageShift, uint64(hi-lo)<<abi.PageShift)
	mem := d.hw.Memory()
	moved := 0
	// Highest page first: the frames go back on the pool's stack in
	// descending order, so the next window pops them in ascending order,
	// consecutive as they were — so the fragment field serveBlock writes
	// after the move (refragment, fragment.go) covers the window, and the
	// engine moves it as one run through one TLB entry again, not a
	// translation per page.
	for k := len(back) - 1; k >= 0; k-- {
		i := back[k]
		p := &m.pages[i]
		if p.where == pageDevice {
			copy(m.host.bytes[uint64(i)<<abi.PageShift:], mem[p.frame:p.frame+1<<abi.PageShift])
			d.freeFrame(p.frame)
			d.blockOut(m, i) // evict.go
			p.lastMove = now
			moved++
		}
		p.where, p.changed = pageHost, now
	}
	d.um.stats.ToHost += uint64(moved)
	return moved
}

// ANCHOR_END: migrate

// ANCHOR: frame

// frame returns a free device frame: from the pool, from the allocator in
// chunks of 16, or by evicting a block the eviction policy chooses (evict.go)
// — never one that holds pages [lo, hi) of keep, the window being moved,
// so a window cannot evict itself.
func (d *Driver) frame(keep *Managed, lo, hi int) (uint64, bool) {
	u := &d.um
	if len(u.frames) == 0 {
		if chunk, err := d.alloc.AllocAligned(frameChunk, frameChunk); err == nil {
			u.chunks[chunk] = 0
			for f := chunk + frameChunk - 1<<abi.PageShift; ; f -= 1 << abi.PageShift { // popped lowest first
				u.frames = append(u.frames, f)
				if f == chunk {
					break
				}
			}
		} else {
			d.evict(keep, lo, hi, frameChunk>>abi.PageShift, true)
		}
	}
	if len(u.frames) == 0 {
		return 0, false
	}
	f := u.frames[len(u.frames)-1]
	u.frames = u.frames[:len(u.frames)-1]
	u.chunks[f&^(frameChunk-1)]++
	return f, true
}

// ANCHOR_END: frame

// freeFrame gives a frame back to the pool. The pool's invariant, under
// um.mu: for each chunk c, chunks[c] frames of c are in use (a page's)
// and the rest are in frames, each once.
// A frame freed twice would be in frames twice, and two pages would
// share it; the count going below zero is how that shows.
func (d *Driver) freeFrame(f uint64) {
	c := f &^ (frameChunk - 1)
	n, ok := d.um.chunks[c]
	if !ok || n <= 0 {
		panic(fmt.Sprintf("driver: invariant broken: frame %#x freed, its chunk has %d frames in use (known: %v)", f, n, ok))
	}
	d.um.frames = append(d.um.frames, f)
	d.um.chunks[c] = n - 1
}

// releaseChunks gives the allocator back every frame-pool chunk none of
// whose frames is in use.
func (d *Driver) releaseChunks() {
	u := &d.um
	for chunk, used := range u.chunks {
		if used != 0 {
			continue
		}
		u.frames = slices.DeleteFunc(u.frames, func(f uint64) bool { return f&^(frameChunk-1) == chunk })
		delete(u.chunks, chunk)
		d.alloc.Free(chunk)
	}
}

// check returns an error unless [off, off+size) lies in m and m is live.
// The caller holds um.mu.
func (m *Managed) check(off, size uint64) error {
	if m.freed {
		return fmt.Errorf("%w: the allocation at %#x was freed", ErrManaged, m.va)
	}
	if size == 0 || off > m.size || size > m.size-off {
		return fmt.Errorf("%w: range [%d, +%d) is not inside the %d-byte allocation", ErrManaged, off, size, m.size)
	}
	return nil
}

// pagesOf returns the first page and the number of pages [off, off+size)
// touches.
func pagesOf(off, size uint64) (int, int) {
	first := off >> abi.PageShift
	last := (off + size - 1) >> abi.PageShift
	return int(first), int(last - first + 1)
}

// ANCHOR: sync

// Sync brings every page of m that is on the device back to the host, so
// that the host may read what the device wrote, or write a page the device
// had. It is the host's side of coherence here, because the host's
// accesses cannot be trapped: the way to trap them, userfaultfd, hands a
// thread's page fault to another thread to answer — and in a Go program
// that thread is a goroutine, which cannot run while the garbage
// collector stops the world, which waits for the faulting thread
// (cmd/uffdstw runs the experiment: the process stops for good). Wait
// for the commands that write m before calling Sync: a page a running
// command writes comes back with its writes so far, and the command faults
// it over again.
func (m *Managed) Sync() error {
	d := m.d
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if err := m.check(0, m.size); err != nil {
		return err
	}
	d.migrateTrace(d.Now(), d.toHost(m, 0, len(m.pages), false), ToHost)
	m.forgetRecordsLocked()
	return nil
}

// forgetRecordsLocked makes every fault record about m's pages made until
// now stale (serveBatch). Records are matched to pages by context and VA,
// and both are reused: a record read late can be about an allocation that
// was freed, a context that was closed, or a channel closed while it was
// stalled, and a new allocation's pages have not moved, so the page's own
// moves cannot tell. AllocManaged calls it, so no record from before the
// allocation moves its pages; and Sync, so that none from before the Sync
// moves a page the host is about to write. A command still stalled on a
// page loses nothing: the replay resumes it, and it faults again. The
// caller holds um.mu.
func (m *Managed) forgetRecordsLocked() {
	now := m.d.Now()
	for i := range m.pages {
		m.pages[i].changed = now
	}
}

// ANCHOR_END: sync

// migrateTrace records a migration that began at start, if it moved
// anything.
func (d *Driver) migrateTrace(start uint64, pages int, to Location) {
	if d.trace != nil && pages > 0 {
		status := uint8(0)
		if to == ToHost {
			status = 1
		}
		d.trace.Record(trace.Event{Kind: trace.KindMigrate, Start: start, End: d.Now(), Arg: uint64(pages), Status: status})
	}
}

// Migration is a Prefetch in flight.
type Migration struct {
	done  chan struct{}
	err   error
	pages int
}

// Wait waits for the migration to finish and returns its error.
func (mg *Migration) Wait() error {
	<-mg.done
	return mg.err
}

// Pages reports how many pages it moved; valid after Wait.
func (mg *Migration) Pages() int { return mg.pages }

// prefetchBatch is how many pages a Prefetch moves per hold of um.mu, so
// the fault handler is not kept waiting behind a long one.
const prefetchBatch = 64

// ANCHOR: prefetch

// Prefetch moves the pages of [off, off+size) of m to the device or to the
// host, ahead of use, as cudaMemPrefetchAsync does: it returns at once,
// and the Migration's Wait returns when every page has been moved, or
// mapped remotely where it could not be (a thrashing page, no frame
// free); for a range larger than device memory, later batches evict
// earlier ones. It moves
// prefetchBatch pages at a time, so faults are served between batches.
func (m *Managed) Prefetch(off, size uint64, to Location) (*Migration, error) {
	d := m.d
	if to != ToDevice && to != ToHost {
		return nil, fmt.Errorf("%w: %v is not a place to prefetch to", ErrManaged, to)
	}
	d.um.mu.Lock()
	err := m.check(off, size)
	d.um.mu.Unlock()
	if err != nil {
		return nil, err
	}
	first, n := pagesOf(off, size)
	mg := &Migration{done: make(chan struct{})}
	go func() {
		defer close(mg.done)
		for i := first; i < first+n; i += prefetchBatch {
			k := min(prefetchBatch, first+n-i)
			d.um.mu.Lock()
			if m.freed {
				d.um.mu.Unlock()
				mg.err = fmt.Errorf("%w: the allocation at %#x was freed during a prefetch", ErrManaged, m.va)
				return
			}
			start := d.Now()
			var moved int
			if to == ToDevice {
				moved = d.toDevice(m, i, k)
				if moved > 0 { // as serveBlock does: fragment fields once every entry is stored
					d.refragment(m.ctx.root, m.va+uint64(i)<<abi.PageShift, uint64(k)<<abi.PageShift)
				}
			} else {
				moved = d.toHost(m, i, k, false)
			}
			d.migrateTrace(start, moved, to)
			mg.pages += moved
			d.um.mu.Unlock()
		}
	}()
	return mg, nil
}

// ANCHOR_END: prefetch

// Free gives m back: its entries are cleared (a command that reaches them
// afterwards fails with FaultUnmapped), the engines' TLBs invalidated, its
// frames returned and its host region freed. Its addresses are handed out
// again only once the commands queued before the Free have run
// (deferred.go): a command queued before it faults, and never lands in a
// later allocation.
func (m *Managed) Free() error {
	d := m.d
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if m.freed {
		return fmt.Errorf("%w: the allocation at %#x was freed already", ErrManaged, m.va)
	}
	d.freeManagedLocked(m)
	return nil
}

// freeManagedLocked is Free with um.mu held.
func (d *Driver) freeManagedLocked(m *Managed) {
	queued := d.queuedWork() // before the entries go: the commands that might name m
	m.freed = true
	m.ctx.mu.Lock()
	for i := range m.pages {
		storePTE(d.vm.pool.mem, m.pages[i].pte, 0)
	}
	d.refragment(m.ctx.root, m.va, uint64(len(m.pages))<<abi.PageShift)
	empty := d.unlinkEmptyTables(m.ctx.root, m.va, uint64(len(m.pages))<<abi.PageShift)
	m.ctx.mu.Unlock()
	d.invalidate(m.ctx.id, m.va, uint64(len(m.pages))<<abi.PageShift)
	d.vm.pool.freeTables(empty)
	for i := range m.pages {
		if p := &m.pages[i]; p.where == pageDevice {
			d.freeFrame(p.frame)
			d.blockOut(m, i)
		}
	}
	d.releaseChunks()
	d.um.allocs[m.ctx.id] = slices.DeleteFunc(d.um.allocs[m.ctx.id], func(x *Managed) bool { return x == m })
	d.deferFree(deferredFree{queued: queued, ctx: m.ctx, va: m.va})
	d.HostFree(m.host)
}

// freeContextManaged frees every managed allocation of c (Context.Close).
func (d *Driver) freeContextManaged(c *Context) {
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	for _, m := range slices.Clone(d.um.allocs[c.id]) {
		d.freeManagedLocked(m)
	}
	delete(d.um.allocs, c.id)
}

// Resident reports how many of m's pages are on the device and how many
// are mapped remotely, for tests and tools.
func (m *Managed) Resident() (device, remote int) {
	m.d.um.mu.Lock()
	defer m.d.um.mu.Unlock()
	for _, p := range m.pages {
		switch p.where {
		case pageDevice:
			device++
		case pageRemote:
			remote++
		}
	}
	return device, remote
}
