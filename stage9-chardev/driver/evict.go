package driver

import (
	"container/list"
	"fmt"

	"softgpu/stage9-chardev/abi"
)

// Eviction: when device memory is full, the fault handler moves blocks of
// managed pages back to the host to make room (managed.go, frame), and so
// does an Alloc that finds the device full (yieldFrames, below). The
// unit is a block — 2 MiB of an allocation, as UVM evicts whole root
// chunks — and a block leaves with one ranged invalidation of its pages
// (toHost), not one handshake per page.
//
// The blocks with pages on the device sit in um.resident in the order
// they came, and the policy chooses which goes:
//
//	fifo   the front one: the block that came first. It ignores use, so
//	       a hot block that came early leaves before a cold one that
//	       came late.
//	clock  second chance (the CLOCK algorithm): the hand is the front.
//	       A block whose pages an engine has used since the hand last
//	       passed — an accessed bit set in one of their entries
//	       (abi.PTEAccessed, set by the engines' walks) — has its bits
//	       cleared and goes to the back; the first block found unused
//	       leaves. Within two turns the hand finds one, if any block may
//	       go at all.
//
// Neither is LRU: nothing records when a page was last used, only
// whether it was used since the hand passed it.
//
// The accessed bits are cleared with a compare-and-swap from the entry
// read, so a bit an engine sets meanwhile, or an entry the device never
// sees changed, is not lost; the TLBs are not flushed for it (as Linux
// does not flush for its accessed bits): a page an engine reaches only
// through a TLB entry it already has looks unused to the next look.
//
// State, guarded by um.mu: um.resident, each allocation's blocks.

// Eviction is how a block is chosen to leave device memory.
type Eviction int

const (
	// EvictClock gives a block used since the hand last passed a second
	// chance.
	EvictClock Eviction = iota
	// EvictFIFO evicts the block that came to the device first.
	EvictFIFO
)

func (e Eviction) String() string {
	switch e {
	case EvictClock:
		return "clock"
	case EvictFIFO:
		return "fifo"
	}
	return fmt.Sprintf("Eviction(%d)", int(e))
}

// Defined reports whether e is a policy.
func (e Eviction) Defined() bool { return e == EvictClock || e == EvictFIFO }

// mblock is a block of an allocation's pages, for eviction.
type mblock struct {
	hand     *list.Element // its place in um.resident while resident > 0
	resident int           // its pages on the device
}

// blockRef names a block in um.resident.
type blockRef struct {
	m     *Managed
	block int
}

// blockIn counts page i of m on the device, and puts its block at the
// back of um.resident if it is new there. The caller holds um.mu.
func (d *Driver) blockIn(m *Managed, i int) {
	b := &m.blocks[i/blockPages]
	if b.resident == 0 {
		b.hand = d.um.resident.PushBack(blockRef{m, i / blockPages})
	}
	b.resident++
}

// blockOut counts page i of m off the device, and takes its block out of
// um.resident if it was the last. The caller holds um.mu.
func (d *Driver) blockOut(m *Managed, i int) {
	b := &m.blocks[i/blockPages]
	if b.resident--; b.resident == 0 {
		d.um.resident.Remove(b.hand)
		b.hand = nil
	}
}

// ANCHOR: evict

// evict moves blocks back to the host, as the policy chooses them, until
// n pages have gone or no block may go: never a block that holds pages
// [lo, hi) of keep, the pages being moved in. It returns the pages it
// moved. chances is whether the clock gives a referenced block its second
// chance (the policy's rule); yieldFrames takes it away when a pass moved
// nothing.
func (d *Driver) evict(keep *Managed, lo, hi, n int, chances bool) (moved int) {
	u := &d.um
	for looked, limit := 0, 2*u.resident.Len(); n > 0 && looked < limit; looked++ {
		e := u.resident.Front()
		if e == nil {
			return
		}
		ref := e.Value.(blockRef)
		first, end := ref.block*blockPages, min((ref.block+1)*blockPages, len(ref.m.pages))
		if ref.m == keep && first < hi && lo < end {
			u.resident.MoveToBack(e) // being filled: not a candidate this time round
			continue
		}
		if chances && u.eviction == EvictClock && d.referenced(ref.m, first, end) {
			u.resident.MoveToBack(e) // its second chance
			u.stats.Referenced++
			if h := d.hooks.SecondChance; h != nil {
				h()
			}
			continue
		}
		gone := d.toHost(ref.m, first, end-first, false) // one ranged invalidation
		u.stats.Evicted += uint64(gone)
		u.stats.Evictions++
		n -= gone
		moved += gone
	}
	return moved
}

// ANCHOR_END: evict

// yieldFrames gives device memory that managed pages hold back to the
// allocator, for an Alloc that found the device full (allocMemory).
// Managed pages are a cache of device memory: the fault handler evicts
// them when it needs frames, and an Alloc may not be refused for them
// either. NVIDIA's driver is built the same way: UVM takes its frames from
// the physical allocator it shares with the rest of the driver (PMA), and
// registers eviction callbacks with it (uvm_pmm_gpu.c), so an allocation
// that finds memory short has UVM evict. Without this, a program that had
// moved a managed allocation to the device was refused the memory its
// pages held, and one whose pages had all gone home again was refused the
// frames they left idle in the pool. In the daemon an Alloc is charged
// against its client's quota of device memory and managed pages are not
// (server/quota.go), so without it a stranger's managed pages would hold
// memory that another client's quota grants.
//
// Each call takes steps until one gives memory back, and reports whether
// one did; *step, which the caller starts at 0, says which steps are
// taken:
//
//	1     the frame-pool chunks none of whose frames is in use: they
//	      cost no one anything
//	2, …  blocks go home in the eviction policy's order until they have
//	      freed 16 frames (a chunk), then 32, 64 and so on, doubling, and
//	      with them the chunks they leave idle; the caller tries its
//	      Alloc again after each step that gave memory back
//
// NVIDIA's PMA asks UVM to evict the pages of a physical range it has
// chosen, for a contiguous allocation, or a number of pages (pma.h's
// eviction callbacks): what the allocation needs, and no more. Here the
// allocator cannot name such a range, since which blocks' frames would
// free a run as large as the Alloc wants cannot be told from the blocks;
// doubling asks for at most about twice what the policy's order needs,
// where sending every block home, as this did first, made a 64 KiB Alloc
// cost every managed page its place on the device
// (TestAnAllocEvictsOnlyWhatItNeeds).
//
// Nothing is sent home for an Alloc of size bytes that all of it would not
// make room for: more than the free memory and every frame-pool chunk
// together (TestAnAllocThatCannotFitEvictsNothing).
func (d *Driver) yieldFrames(step *int, size uint64) bool {
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if d.alloc.freeBytes()+uint64(len(d.um.chunks))*frameChunk < size {
		return false
	}
	for {
		*step++
		before := d.alloc.InUse()
		if *step > 1 {
			if d.um.resident.Len() == 0 {
				return false // nothing left to send home
			}
			want := frameChunk >> abi.PageShift << min(*step-2, 30)
			if d.evict(nil, 0, 0, want, true) == 0 {
				// Every block was used again by the time the hand came
				// back: engines that keep walking all of it set the bits
				// as fast as the clock clears them. Without its second
				// chances the step moves blocks in the clock's order; with
				// them this loop, holding um.mu, lasted as long as the
				// engines did (TestAnAllocEndsWhileEnginesKeepTouchingEveryBlock).
				d.evict(nil, 0, 0, want, false)
			}
		}
		d.releaseChunks()
		if d.alloc.InUse() < before {
			return true
		}
	}
}

// freeBytes is how much of a's memory is free, in all its spans.
func (a *Allocator) freeBytes() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n uint64
	for _, s := range a.free {
		n += s.size
	}
	return n
}

// referenced reports whether an engine has used any of the pages
// [first, end) of m on the device since the bits were last cleared, and
// clears them.
func (d *Driver) referenced(m *Managed, first, end int) bool {
	used := false
	for i := first; i < end; i++ {
		if p := &m.pages[i]; p.where == pageDevice && clearAccessed(d.vm.pool.mem, p.pte) {
			used = true
		}
	}
	return used
}
