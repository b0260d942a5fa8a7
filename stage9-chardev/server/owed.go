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
// Nothing accepted is lost: a charge is refunded once the driver gives
// back, and a call refused while its uid owes has the driver reclaim
// first — on the uid's turn (settleDue), so that one uid's refused calls,
// however many connections make them, cost the driver's scans of what is
// deferred a few times a tenth of a second, not once per call. A client
// that itself owes some of what it asks for, freed behind its own work
// that may be about to pass, has the refusal wait owedWait for it, trying
// again at each of its uid's turns; any other is refused at once, with
// what is owed. When every refusal of an owing uid waited, polling every
// millisecond, a stranger that owed for minutes (freed behind a queue of
// DELAYs) and looped ALLOCs on forty connections had the daemon reclaim
// tens of times per refused call
// (TestRefusedCallsOfAnOwingUidDoNotMultiplyReclaims). A client at its
// quota whose freed memory waits behind work of its own that runs longer
// is refused, and rightly: the memory is still taken, by that work; it
// may wait for the work and ask again, as a process in a memory cgroup
// may reclaim and retry. So may a client refused for what another client
// of its uid owes: it cannot hurry that work, and waiting for it would
// spend the daemon's reclaims on a call that likely fails. A client that
// goes with charges owed leaves them to its uid (orphanOwed), as it
// leaves its closed channels' files (linger.go): the uid is charged until
// the driver gives back, and refunded then.
//
// Locks: the driver never calls into the server; it only stores Done.
// A callback would run under the driver's vm.freeMu or pinMu, from
// whichever goroutine happened to reclaim — another client's ALLOC —
// and would have to take quotaMu there; a flag the server reads leaves
// the order as it was. settle calls Reclaim with no lock of the server's
// held, then takes quotaMu alone, and reads each Release's Done under it
// (an atomic load): quotaMu stays a leaf.
//
// Invariants, under quotaMu: every owed record's pools are part of its
// uid's use, and of its owner's while it has one; its Release is not Done
// but for the moment between the driver's signal and the next settle.
// turns holds an entry only for a uid that uidUse does.

// owed is a charge for something freed that the driver still holds.
type owed struct {
	owner *client // nil once the client has gone: then the charge is its uid's alone
	uid   uint32
	pools uapi.Pools
	back  *driver.Release
}

// owedWait bounds how long a call refused for its quota waits for the
// driver to give back what the client itself freed behind its own queued
// work: as long as the driver waits for a retiring window entry
// (driver.retireWait). A stranger's DELAYs outlast it; a client's last
// fill, about to complete, does not.
const owedWait = 100 * time.Millisecond

// firstGap and lastGap bound the gaps between a uid's turns to settle
// (settleDue): the first turn comes at a refusal, the next a millisecond
// later, each after that twice as far from the last, up to lastGap. A
// client whose work passes within a few milliseconds is settled for
// within a few milliseconds, and seven times within owedWait; a uid whose
// calls are refused without end has the driver reclaim for them once
// every lastGap.
const (
	firstGap = time.Millisecond
	lastGap  = 64 * time.Millisecond
)

// settleTurn is when the refused calls of one uid may next settle.
type settleTurn struct {
	next time.Time     // no settle for them before this
	gap  time.Duration // from the next turn to the one after it
}

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
			delete(s.turns, o.uid)
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
// uid owes. It settles if the uid's turn has come, and tries again; if
// the client itself owes some of what the call asks for — it freed that
// behind its own queued work, which may be about to pass — it waits for
// the uid's next turn and tries again, until owedWait has passed. Any
// other refusal is final: what would have to pass is another client's
// work, or a gone client's. It looks again on the turns rather than
// being woken: the driver gives back only when something asks it to (an
// allocation, or Reclaim), and signals no one, as it never calls into the
// daemon.
func (c *client) chargeOwed(more uapi.Pools) error {
	s := c.s
	deadline := time.Now().Add(owedWait)
	for {
		if s.settleDue(c.uid, time.Now()) {
			s.settle()
		}
		err := c.tryCharge(more)
		if err == nil {
			return nil
		}
		wake, wait := c.owedWake(more, deadline)
		if !wait {
			client, uid := s.owedBy(c)
			return fmt.Errorf("%w (freed but held by the driver until the commands queued before the free have run: %+v of the client's, %+v of its uid's)", err, client, uid)
		}
		owedSleep(time.Until(wake))
	}
}

// settleDue reports whether a call of uid refused at now may settle, and
// if so takes the uid's turn: the next comes gap later, and the gap
// doubles, up to lastGap. A uid with no call refused in the lastGap after
// its turn came starts again at firstGap: its refusals come one at a
// time, as a well-behaved client's do. All the uid's refused calls share
// the turns, so however many connections it refuses on, the driver
// reclaims for them once a turn. A uid that holds nothing owes nothing,
// and is not settled for.
func (s *Server) settleDue(uid uint32, now time.Time) bool {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	if s.uidUse[uid] == nil {
		return false
	}
	t := s.turns[uid]
	switch {
	case t == nil || now.Sub(t.next) >= lastGap:
		t = &settleTurn{gap: firstGap}
		s.turns[uid] = t
	case now.Before(t.next):
		return false
	}
	t.next = now.Add(t.gap)
	t.gap = min(2*t.gap, lastGap)
	return true
}

// owedWake returns when c, refused more, tries again: at its uid's next
// turn to settle, or at deadline if that comes first. It reports false —
// refuse now — if deadline has passed, or if c owes none of the pools
// more asks for.
func (c *client) owedWake(more uapi.Pools, deadline time.Time) (time.Time, bool) {
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	if !time.Now().Before(deadline) || !slices.ContainsFunc(s.owed, func(o *owed) bool { return o.owner == c && shares(o.pools, more) }) {
		return time.Time{}, false
	}
	if t := s.turns[c.uid]; t != nil && t.next.Before(deadline) {
		return t.next, true
	}
	return deadline, true
}

// shares reports whether some pool is in both a and b.
func shares(a, b uapi.Pools) bool {
	return a.DeviceMemory > 0 && b.DeviceMemory > 0 || a.PinnedBytes > 0 && b.PinnedBytes > 0 ||
		a.WindowEntries > 0 && b.WindowEntries > 0 || a.Contexts > 0 && b.Contexts > 0 ||
		a.Channels > 0 && b.Channels > 0 || a.PageTables > 0 && b.PageTables > 0
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
