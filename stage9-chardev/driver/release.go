package driver

import (
	"fmt"
	"sync/atomic"
)

// Giving back, as the layer above sees it. A free of what queued work may
// name returns before the driver gives the thing back: device memory and
// a context's VA wait in vm.deferred (deferred.go), a window entry and its
// bus range in retiring (pinned.go), until the commands queued before the
// free have run. Whoever accounts for what a user holds must count it as
// held until then. Stage 9's daemon charges each client's quota for what
// it holds (server/quota.go); refunded when FREE returned, a client that
// kept work queued on its own channels and allocated and freed in a loop
// held 12 MiB of device memory against a 4 MiB quota, and every window
// entry against a quota of half of them.
//
// So a free can hand its caller a Release, which the driver signals when
// it gives the thing back: reclaimFreed when the memory and the VA go
// back to their allocators, reclaimLocked when the entry returns to the
// pool. Real systems keep the charge in the same place. In Linux DRM a
// buffer object the user has closed lives on until the fences of the
// work that may use it have signalled (TTM's delayed destroy), and its
// memory is the owner's until then; a memory cgroup's charge stays until
// the page is really freed, not when the process lets go of it.
//
// Giving back is lazy: reclaimFreed and reclaimLocked run when an
// allocation needs room (allocMemory, register) or when Reclaim is
// called. So a caller that holds a charge against a Release calls Reclaim
// before it refuses anything for that charge: what has passed is never
// counted as held.
//
// A Release is signalled at most once, under vm.freeMu or pinMu, by the
// goroutine that gives the thing back; the driver never calls out when it
// does, so the caller may read Done with any lock of its own held, and
// must take none of its own inside the driver. Done's load pairs with the
// store in signal: once Done reports true the thing is back in the
// driver's pools.

// Release reports when the driver has given back what a free deferred.
type Release struct {
	given atomic.Bool
}

// Done reports whether the driver has given back what the free deferred.
// A nil Release is done: its free deferred nothing.
func (r *Release) Done() bool { return r == nil || r.given.Load() }

// signal marks r done; nil is a free no one waits on.
func (r *Release) signal() {
	if r != nil {
		r.given.Store(true)
	}
}

// Reclaim gives back every deferred free and every retired window entry
// whose queued work has run, signalling their Releases.
func (d *Driver) Reclaim() {
	d.reclaimFreed()
	d.pinMu.Lock()
	defer d.pinMu.Unlock()
	d.reclaimLocked()
}

// FreeRelease is Free, and returns the Release the driver signals when it
// has given the memory (or the VA, for a mapping of pinned memory) back.
// If the unmap's invalidation passed its bound (Unmap), the memory is kept
// from reuse for good, and the Release is signalled when the VA comes
// back: what a hung engine keeps is the driver's loss, not the caller's.
func (c *Context) FreeRelease(va uint64) (*Release, error) {
	if c.id == 0 {
		if c.d.closed.Load() {
			return nil, ErrClosed
		}
		return c.d.freeMemory(va)
	}
	c.mu.Lock()
	m, ok := c.mappings[va]
	if ok {
		delete(c.mappings, va)
	}
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: no mapping at %#x in context %d", ErrBadFree, va, c.id)
	}
	return c.unmap(m)
}

// FreeRelease is Free, and returns the Release the driver signals when
// the host side's window entry has retired. (Its addresses in the
// context come back on their own; no one is charged for them.)
func (m *Managed) FreeRelease() (*Release, error) {
	d := m.d
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if m.freed {
		return nil, fmt.Errorf("%w: the allocation at %#x was freed already", ErrManaged, m.va)
	}
	return d.freeManagedLocked(m)
}
