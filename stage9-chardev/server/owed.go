package server

import (
	"fmt"
	"slices"
	"time"

	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/uapi"
)

// A charge is held until the driver gives back what it paid for.
//
// FREE, HOST_UNREGISTER and MANAGED_FREE return before the driver gives
// the thing back: the memory (driver/deferred.go) and the window entry
// (driver/pinned.go) wait until the commands queued before the free have
// run, and until then they are as taken as before the call — by the
// client's own queued work. Refunded when the call returned, a stranger
// that kept DELAYs queued on its own channels and allocated and freed in
// a loop held 12 MiB of device memory against a 4 MiB quota, and all 63
// window entries against a quota of 32, and the next client was refused
// (TestAStrangerCannotHoldMoreMemoryThanItsQuotaByFreeingBehindItsWork,
// TestAStrangerCannotTakeTheWholeWindowByFreeingBehindItsWork). So the
// charge stays, owed, until the driver signals the free's Release
// (driver/release.go): a Linux DRM buffer object the user has closed
// lives, and is its owner's, until the fences of the work that may use
// it have signalled; a memory cgroup's charge stays until the page is
// really freed, not when the process lets go of it.
//
//	FREE, …        the driver defers the free and returns its Release;
//	               the client still holds the charge, now owed
//	the driver     gives the thing back when its queued work has run —
//	               lazily, at the next allocation that needs room, or
//	               Reclaim — and signals the Release
//	settle         Reclaim, then refund every owed charge whose Release
//	               is done: to its client, or to its uid alone once the
//	               client has gone (every charge refunds what is done
//	               first, settleLocked, without the Reclaim)
//
// Nothing accepted is lost: a client is never refused for what the
// driver has given back, since charge settles before it refuses anyone
// whose uid owes; and a client whose own work is about to pass has the
// refusal wait owedWait for it. A client at its quota whose freed memory
// waits behind work of its own that runs longer is refused, and rightly:
// the memory is still taken, by that work; it may wait for the work and
// ask again, as a process in a memory cgroup may reclaim and retry. A
// client that goes with charges owed leaves them to its uid (orphanOwed),
// as it leaves its closed channels' files (linger.go): the uid is charged
// until the driver gives back, and refunded then.
//
// Locks: the driver never calls into the server; it only stores Done.
// A callback would run under the driver's vm.freeMu or pinMu, from
// whichever goroutine happened to reclaim — another client's ALLOC —
// and would have to take quotaMu there; a flag the server reads leaves
// the order as it was. settle calls Reclaim with no lock of the server's
// held, then takes quotaMu alone, and reads each Release's Done under it
// (an atomic load): quotaMu stays a leaf.
//
// Invariant, under quotaMu: every owed record's pools are part of its
// uid's use, and of its owner's while it has one; its Release is not Done
// but for the moment between the driver's signal and the next settle.

// owed is a charge for something freed that the driver still holds.
type owed struct {
	owner *client // nil once the client has gone: then the charge is its uid's alone
	uid   uint32
	pools uapi.Pools
	back  *driver.Release
}

// owedWait bounds how long a call refused for its quota waits, while its
// uid owes, for the driver to give back what the client's own queued work
// holds: as long as the driver waits for a retiring window entry
// (driver.retireWait). A stranger's DELAYs outlast it; a client's last
// fill, about to complete, does not.
const owedWait = 100 * time.Millisecond

// owedSleep is how a refused call waits for its next try: time.Sleep,
// but for the tests of owed.go.
var owedSleep = time.Sleep

// owe keeps the charge less, which c holds, until back is done. A free
// that deferred nothing (a nil or done Release) is refunded at once.
func (c *client) owe(less uapi.Pools, back *driver.Release) {
	if back.Done() {
		c.refund(less)
		return
	}
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	s.owed = append(s.owed, &owed{owner: c, uid: c.uid, pools: less, back: back})
}

// settle has the driver give back whatever has passed, and refunds every
// owed charge it gave back.
func (s *Server) settle() {
	s.settles.Add(1)
	s.drv.Reclaim() // no lock of the server's held: Reclaim takes the driver's
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	s.settleLocked()
}

// settleLocked refunds every owed charge whose Release is done, without
// asking the driver for more: every charge runs it first (tryCharge), so
// what the driver gave back at its last reclaim — every allocation and
// registration reclaims — is not counted, and owed holds little more
// than what the driver really holds.
func (s *Server) settleLocked() {
	s.owed = slices.DeleteFunc(s.owed, func(o *owed) bool {
		if !o.back.Done() {
			return false
		}
		if o.owner != nil {
			if pool, _, _ := overBy(o.pools, uapi.Pools{}, o.owner.use); pool != "" {
				panic(fmt.Sprintf("server: invariant broken: an owed %+v of a client holding %+v", o.pools, o.owner.use))
			}
			add(&o.owner.use, o.pools, -1)
		}
		uid := s.uidUse[o.uid]
		if uid == nil {
			panic(fmt.Sprintf("server: invariant broken: an owed %+v of uid %d, which holds nothing", o.pools, o.uid))
		}
		add(uid, o.pools, -1)
		if *uid == (uapi.Pools{}) {
			delete(s.uidUse, o.uid)
		}
		return true
	})
}

// owes reports whether any charge of uid is owed.
func (s *Server) owes(uid uint32) bool {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	return slices.ContainsFunc(s.owed, func(o *owed) bool { return o.uid == uid })
}

// owedBy sums what c, and its uid, owe: what a quota refusal tells the
// client.
func (s *Server) owedBy(c *client) (client, uid uapi.Pools) {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	for _, o := range s.owed {
		if o.uid == c.uid {
			add(&uid, o.pools, +1)
		}
		if o.owner == c {
			add(&client, o.pools, +1)
		}
	}
	return client, uid
}

// orphanOwed hands what c owes to its uid alone: c is going (teardown).
// The uid's use is unchanged; settle refunds it when the driver gives
// back. After it, no refund of an owed charge reaches c.
func (c *client) orphanOwed() {
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	for _, o := range s.owed {
		if o.owner != c {
			continue
		}
		if pool, _, _ := overBy(o.pools, uapi.Pools{}, c.use); pool != "" {
			panic(fmt.Sprintf("server: invariant broken: orphaning an owed %+v of a client holding %+v", o.pools, c.use))
		}
		add(&c.use, o.pools, -1)
		o.owner = nil
	}
}

// chargeOwed is charge for a call its quota refused while the client's
// uid owes: it settles, and tries again, for at most owedWait, since what
// is owed may be the client's own work about to pass.
func (c *client) chargeOwed(more uapi.Pools) error {
	deadline := time.Now().Add(owedWait)
	for {
		c.s.settle()
		err := c.tryCharge(more)
		if err == nil || !c.s.owes(c.uid) {
			return err
		}
		if time.Now().After(deadline) {
			client, uid := c.s.owedBy(c)
			return fmt.Errorf("%w (freed but held by the driver until the commands queued before the free have run: %+v of the client's, %+v of its uid's)", err, client, uid)
		}
		owedSleep(time.Millisecond)
	}
}

// oweUnpinned is owe for a registered region's charge (HOST_UNREGISTER,
// MANAGED_FREE, a registration undone), err being the free's: its pinned
// bytes are refunded now, since the free unlocked them, and its window
// entry when the entry retires. If the free failed, an engine that did
// not answer may still hold the region, which stays locked until the
// entry can retire (driver/pinned.go, held): then the whole charge waits.
func (c *client) oweUnpinned(pinned uapi.Pools, back *driver.Release, err error) {
	if err == nil && pinned.PinnedBytes > 0 {
		c.refund(uapi.Pools{PinnedBytes: pinned.PinnedBytes})
		pinned.PinnedBytes = 0
	}
	c.owe(pinned, back)
}
