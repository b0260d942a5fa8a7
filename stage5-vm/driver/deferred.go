package driver

import (
	"errors"
	"fmt"
	"slices"
)

// Freeing what queued work may name. A command names memory by address
// when it is queued and uses it when it runs, maybe long after: a COPY
// queued behind a DELAY, then a Free of its destination, then an Alloc —
// and if the Alloc could hand the same memory (or, in a context, the same
// VA) out again, the COPY would write into the new allocation, and report
// success. So a free is deferred, as HostFree defers a bus range
// (pinned.go) and as GEM keeps a buffer until its fences signal:
//
//	Free / Unmap   note each channel's mark (the commands queued so far)
//	               take the mapping out (its entries, its TLB entries: a
//	               command that names it from now on faults)
//	               defer the device memory and the VA until every channel
//	               has passed its mark
//	Alloc          reclaim what has passed; if memory is short and some is
//	               still deferred, wait for any of it to pass, and retry
//
// A command queued before the free that runs after it therefore faults (in
// a context: its VA is unmapped and not handed out again) or lands in
// memory no one owns (context 0, whose linear map reaches all of device
// memory) — never in the next allocation.
//
// VAs are also handed out next-fit (Context.nextVA): a context's VAs are
// used in order through its 128 TiB space, and a freed VA comes back only
// when the cursor has gone all the way round. So a stale pointer — one
// used after its Free returned, by a command queued later — faults in the
// common case instead of landing in the next allocation.
//
// Invariants, under vm.freeMu:
//   - every entry of vm.deferred names device memory still live in
//     d.alloc (pa != 0) and/or a VA still live in its context's allocator;
//   - an address is in vm.deferredPA exactly while an entry names it, so a
//     second Free of it is ErrDoubleFree, not a second deferral.
//
// Lock order: vm.freeMu, then a context's mu (reclaim gives a VA back).

// deferredFree is device memory and/or a context's VA range, freed while
// commands queued before the free may still name them.
type deferredFree struct {
	queued retired  // the channels' marks at the free (its slot and bus are unused)
	pa     uint64   // device memory to give back to d.alloc; 0 for none (AllocBase keeps 0 from being an allocation)
	ctx    *Context // the context whose VA allocator gets va back; nil for none
	va     uint64
}

// queuedWork notes each channel's mark: the commands queued so far.
func (d *Driver) queuedWork() retired {
	var r retired
	for c, ch := range d.channels {
		r.marks[c] = ch.mark()
	}
	return r
}

// deferFree holds f until the work it names has run.
func (d *Driver) deferFree(f deferredFree) {
	if h := d.hooks.Deferring; h != nil {
		h(f.pa) // a test may hold a free here, between its marks and its append
	}
	d.vm.freeMu.Lock()
	defer d.vm.freeMu.Unlock()
	if f.pa != 0 {
		d.vm.deferredPA[f.pa] = true
	}
	d.vm.deferred = append(d.vm.deferred, f)
	d.vm.deferredAdds.Add(1) // after the append: a waiting allocMemory takes freeMu when it sees this
}

// reclaimFreed gives back every deferred free whose queued work has run.
func (d *Driver) reclaimFreed() {
	d.vm.freeMu.Lock()
	defer d.vm.freeMu.Unlock()
	d.vm.deferred = slices.DeleteFunc(d.vm.deferred, func(f deferredFree) bool {
		if !d.retired(f.queued) {
			return false
		}
		if f.pa != 0 {
			delete(d.vm.deferredPA, f.pa)
			if err := d.alloc.Free(f.pa); err != nil {
				panic(fmt.Sprintf("driver: invariant broken: deferred memory was not allocated: %v", err))
			}
		}
		if f.ctx != nil {
			f.ctx.mu.Lock()
			err := f.ctx.va.Free(f.va)
			f.ctx.mu.Unlock()
			if err != nil {
				panic(fmt.Sprintf("driver: invariant broken: a deferred VA was not allocated: %v", err))
			}
		}
		return true
	})
}

// ANCHOR: deferfree

// allocMemory runs alloc (an allocation from d.alloc) after reclaiming what
// has passed. If it finds too little memory while some is still deferred,
// it waits until any deferred memory has passed — the engines get there
// by running what is already queued — and tries again. Any, not the
// oldest: frees need not pass in the order they joined the list (a free
// notes its marks before it appends, so two that overlap may append in
// either order), and one that passes while the oldest still waits is
// taken at once — as is one that joins during the wait having passed
// already.
func (d *Driver) allocMemory(alloc func() (uint64, error)) (uint64, error) {
	for {
		d.reclaimFreed()
		addr, err := alloc()
		if err == nil || !errors.Is(err, ErrOutOfMemory) {
			return addr, err
		}
		// Polls copies of the deferred memory's marks without freeMu,
		// which a free takes to append: a free's marks never change once
		// it is deferred. The loads in retired pair with the stores that
		// publish each channel's progress (see retired). The load of
		// deferredAdds pairs with a free's add after its append;
		// reclaimFreed, taking freeMu, then sees the new free.
		d.vm.freeMu.Lock()
		var waiting []retired
		for _, f := range d.vm.deferred {
			if f.pa != 0 {
				waiting = append(waiting, f.queued)
			}
		}
		adds := d.vm.deferredAdds.Load()
		d.vm.freeMu.Unlock()
		if len(waiting) == 0 {
			return 0, err
		}
		if h := d.hooks.Retiring; h != nil {
			h() // a test may let a held free, or the work one waits for, go here
		}
		spinUntil(func() bool { return d.vm.deferredAdds.Load() != adds || slices.ContainsFunc(waiting, d.retired) })
	}
}

// freeMemory defers the free of addr, an allocation of context 0 (Alloc):
// it is checked now, and given back once the commands queued so far have
// run.
func (d *Driver) freeMemory(addr uint64) error {
	queued := d.queuedWork()
	if h := d.hooks.Deferring; h != nil {
		h(addr) // a test may hold a free here, between its marks and its append
	}
	d.vm.freeMu.Lock()
	defer d.vm.freeMu.Unlock()
	if d.vm.deferredPA[addr] {
		return fmt.Errorf("%w: address %#x", ErrDoubleFree, addr)
	}
	if err := d.alloc.checkLive(addr); err != nil {
		return err
	}
	d.vm.deferredPA[addr] = true
	d.vm.deferred = append(d.vm.deferred, deferredFree{queued: queued, pa: addr})
	d.vm.deferredAdds.Add(1) // after the append: a waiting allocMemory takes freeMu when it sees this
	return nil
}

// ANCHOR_END: deferfree

// checkLive returns nil if addr is an allocation, and else the error Free
// would return for it.
func (a *Allocator) checkLive(addr uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.live[addr]; ok {
		return nil
	}
	if a.isFreeLocked(addr) {
		return fmt.Errorf("%w: address %#x", ErrDoubleFree, addr)
	}
	return fmt.Errorf("%w: address %#x", ErrBadFree, addr)
}
