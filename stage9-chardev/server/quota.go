package server

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// Quotas, per client and per uid, on every device-wide pool. Without
// them the first client to ask takes the device: all its memory, every
// DMA window entry, every channel, and as much of the host's RAM as the
// daemon will lock for it. So every call that takes from a pool first
// charges the client and the client's uid (every connection of that
// user, together), and is refused with uapi.ErrQuota — its own errno, not
// ErrNoMemory, so a client can tell "the device is full" from "you have
// had your share" — if either would go past its limit; whatever gives
// the thing back refunds the charge — once the driver has it back, which
// for a free behind queued work is later than the call's return (owed.go)
// — and teardown refunds whatever is left. The pools:
//
//	DeviceMemory   ALLOC's bytes, each rounded up to the pages the driver
//	               maps it with (the memory it really takes), and each
//	               channel's engine-context save area (driver/ctxsave.go),
//	               which comes from the same memory: uncharged, a red
//	               team's stranger within a 4 MiB memory quota filled the
//	               device with 55 channels' areas, and no other client
//	               could open one of its own. Managed
//	               pages on the device are not charged: they live in what
//	               ALLOCs leave, and an ALLOC that finds the device full
//	               evicts them (driver: allocMemory, yieldFrames), so no
//	               client's managed memory holds what another's quota grants
//	PinnedBytes    the bytes the daemon locks for a client's memfd
//	               (HOST_REGISTER, MANAGED_ALLOC): every byte of the
//	               range, since mlock makes a sparse memfd's pages real —
//	               charged before the daemon locks anything
//	WindowEntries  one per registered memfd; the defaults stay below the
//	               device's abi.WindowSlots, and New refuses a limit that
//	               does not, so one client can never exhaust them
//	Contexts       one per ATTACHed connection
//	Channels       one per open channel, the engines' defaults included,
//	               and one per closed channel whose memfds someone still
//	               holds (linger.go): the daemon allocated their pages,
//	               and only letting go of them gives them back. Charged
//	               to the client while it lives, then to its uid alone
//	               (orphaned)
//	PageTables     pages of 4 KiB of the page-table pool (driver/vm.go):
//	               the context's root at ATTACH, then whatever tables each
//	               call that maps (ALLOC, HOST_REGISTER, MANAGED_ALLOC)
//	               adds, read from driver.Context.TablePages before and
//	               after. Tables cost by how sparse a mapping is, not how
//	               big: a 4 KiB ALLOC alone in its 2 MiB of VA takes a
//	               4 KiB leaf table, so without this pool a client within
//	               its memory quota could empty the table pool, and no
//	               other client could ATTACH
//
// (Connections per uid are the accept loop's cap.) The defaults let one
// client alone use the whole device; an operator shares it out with
// softgpud's -client-* and -uid-* flags. CLIENT_QUOTA reports each
// client's use against both limits, for softgpu-smi.
//
// quotaMu is a leaf: nothing else is locked while it is held.
//
// Invariant, under quotaMu: for every uid, uidUse[uid] is the sum of use
// over that uid's clients plus orphaned[uid] channels plus the owed
// charges of its clients gone (owed.go), and each client's use is the sum
// of what it holds, what it freed and the driver still holds included;
// neither is ever above its limit, except that a limit lowered between
// runs does not apply to what a client already holds (limits are fixed
// for the daemon's life).

// Quota is the most of each pool one client — or, as Config.UidQuota,
// all the clients of one uid together — may hold. A zero field means the
// default (defaultQuota).
type Quota struct {
	DeviceMemory  uint64 // bytes of device memory
	PinnedBytes   uint64 // bytes of host memory locked for the client's memfds
	WindowEntries int    // DMA window entries; fewer than abi.WindowSlots
	Contexts      int    // contexts (a client has at most one)
	Channels      int    // open channels
	PageTables    int    // pages of 4 KiB of the page-table pool its contexts' tables take
}

// defaultQuota fills q's zero fields: the whole device for memory and
// channels; for pinned bytes the daemon's RLIMIT_MEMLOCK, or half the
// host's RAM if that is unlimited (root's), since every pinned byte is
// RAM no one else can have; half the window's entries; every context but
// the driver's; for page tables, the pool's free pages for a uid, as it
// may hold every context, and tableLimit of them for a client.
func defaultQuota(q Quota, memory, tablesFree uint64, perClient bool) Quota {
	if q.DeviceMemory == 0 {
		q.DeviceMemory = memory
	}
	if q.PageTables == 0 {
		q.PageTables = int(min(tablesFree, math.MaxUint32))
		if perClient {
			q.PageTables = tableLimit(tablesFree)
		}
	}
	if q.PinnedBytes == 0 {
		q.PinnedBytes = pinLimit()
	}
	if q.WindowEntries == 0 {
		q.WindowEntries = abi.WindowSlots / 2
	}
	if q.Contexts == 0 {
		q.Contexts = abi.MaxContexts - 1
		if perClient {
			q.Contexts = 1
		}
	}
	if q.Channels == 0 {
		q.Channels = abi.NumChannels - abi.NumEngines // all but the driver's own
	}
	return q
}

// tableLimit is a client's default PageTables, from the pages the table
// pool has free once the driver has made its own tables (driver.
// TablePoolFree): all of them, as DeviceMemory's default is all of device
// memory, but for a root table for every other context there can be — so
// that no one client can leave another unable to ATTACH — and never less
// than half of them, as WindowEntries' default is half the window, for a
// pool too small to hold every root anyway. A uid's default is the whole
// free pool, as its default of contexts is every context: the clients of
// one uid may hold all the device's contexts, and need their roots.
// Beyond the roots, the pool is shared as device memory is: first come,
// first served, up to the limits.
func tableLimit(free uint64) int {
	others := uint64(abi.MaxContexts-2) * (abi.RootBytes >> abi.PageShift) // the contexts but the driver's and the client's own
	return int(min(free-min(others, free/2), math.MaxUint32))
}

// pinLimit is the default PinnedBytes: see defaultQuota.
func pinLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		return rl.Cur
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil && si.Totalram > 0 {
		return uint64(si.Totalram) * uint64(si.Unit) / 2
	}
	return 1 << 30
}

// checkQuota refuses a quota no limit can honour.
func checkQuota(name string, q Quota) error {
	switch {
	case q.WindowEntries < 0 || q.Contexts < 0 || q.Channels < 0 || q.PageTables < 0:
		return fmt.Errorf("softgpu: %s quota %+v: a negative limit", name, q)
	case q.WindowEntries >= abi.WindowSlots:
		return fmt.Errorf("softgpu: %s quota of %d DMA window entries: the device has %d, and a quota must leave some for others", name, q.WindowEntries, abi.WindowSlots)
	case q.Channels > math.MaxUint32 || q.Contexts > math.MaxUint32 || q.PageTables > math.MaxUint32:
		return fmt.Errorf("softgpu: %s quota %+v: out of range", name, q)
	case q.PageTables > 0 && q.PageTables < abi.RootBytes>>abi.PageShift:
		return fmt.Errorf("softgpu: %s quota of %d page-table pages: a context's root alone takes %d, so every ATTACH would be refused", name, q.PageTables, abi.RootBytes>>abi.PageShift)
	}
	return nil
}

// pools turns a Quota into the uapi's amounts.
func (q Quota) pools() uapi.Pools {
	return uapi.Pools{DeviceMemory: q.DeviceMemory, PinnedBytes: q.PinnedBytes,
		WindowEntries: uint32(q.WindowEntries), Contexts: uint32(q.Contexts), Channels: uint32(q.Channels),
		PageTables: uint32(q.PageTables)}
}

// overBy names the first pool in which use plus more exceeds limit, or
// returns "".
func overBy(use, more, limit uapi.Pools) (pool string, have, max uint64) {
	for _, p := range []struct {
		name             string
		use, more, limit uint64
	}{
		{"device memory bytes", use.DeviceMemory, more.DeviceMemory, limit.DeviceMemory},
		{"pinned host bytes", use.PinnedBytes, more.PinnedBytes, limit.PinnedBytes},
		{"DMA window entries", uint64(use.WindowEntries), uint64(more.WindowEntries), uint64(limit.WindowEntries)},
		{"contexts", uint64(use.Contexts), uint64(more.Contexts), uint64(limit.Contexts)},
		{"channels", uint64(use.Channels), uint64(more.Channels), uint64(limit.Channels)},
		{"page-table pages", uint64(use.PageTables), uint64(more.PageTables), uint64(limit.PageTables)},
	} {
		if p.more > p.limit || p.use > p.limit-p.more { // use+more > limit, without overflow
			return p.name, p.use, p.limit
		}
	}
	return "", 0, 0
}

// add adds more to use (sign +1) or takes it away (sign -1).
func add(use *uapi.Pools, more uapi.Pools, sign int) {
	if sign > 0 {
		use.DeviceMemory += more.DeviceMemory
		use.PinnedBytes += more.PinnedBytes
		use.WindowEntries += more.WindowEntries
		use.Contexts += more.Contexts
		use.Channels += more.Channels
		use.PageTables += more.PageTables
		return
	}
	use.DeviceMemory -= more.DeviceMemory
	use.PinnedBytes -= more.PinnedBytes
	use.WindowEntries -= more.WindowEntries
	use.Contexts -= more.Contexts
	use.Channels -= more.Channels
	use.PageTables -= more.PageTables
}

// ANCHOR: charge

// charge takes more from the client's and its uid's quotas, or returns an
// error wrapping uapi.ErrQuota that names the pool and both figures. What
// a client has freed stays charged until the driver gives it back
// (owed.go), and the driver gives back lazily: so a refusal while the
// client's uid owes anything is tried again once the driver has given
// back what has passed, on the uid's turn (chargeOwed).
func (c *client) charge(more uapi.Pools) error {
	err := c.tryCharge(more)
	if err != nil && c.s.owes(c.uid) {
		return c.chargeOwed(more)
	}
	return err
}

// tryCharge is charge, as the quotas stand.
func (c *client) tryCharge(more uapi.Pools) error {
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	s.settleLocked() // owed.go
	if pool, have, max := overBy(c.use, more, s.clientLimit); pool != "" {
		return fmt.Errorf("the client holds %d %s of its quota of %d: %w", have, pool, max, uapi.ErrQuota)
	}
	uid := s.uidUse[c.uid]
	if uid == nil {
		uid = new(uapi.Pools)
		s.uidUse[c.uid] = uid
	}
	if pool, have, max := overBy(*uid, more, s.uidLimit); pool != "" {
		return fmt.Errorf("the clients of uid %d hold %d %s of its quota of %d: %w", c.uid, have, pool, max, uapi.ErrQuota)
	}
	add(&c.use, more, +1)
	add(uid, more, +1)
	return nil
}

// ANCHOR_END: charge

// refund gives back what charge took.
func (c *client) refund(less uapi.Pools) {
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	if pool, _, _ := overBy(less, uapi.Pools{}, c.use); pool != "" {
		panic(fmt.Sprintf("server: invariant broken: refund of %+v to a client holding %+v", less, c.use))
	}
	add(&c.use, less, -1)
	uid := s.uidUse[c.uid]
	add(uid, less, -1)
	if *uid == (uapi.Pools{}) {
		delete(s.uidUse, c.uid)
		delete(s.turns, c.uid)
	}
}

// orphan moves n channels of the client's charge to its uid alone: the
// client is going, and those channels' files are still held (linger.go).
// The uid's use is unchanged; refundOrphan gives each back.
func (c *client) orphan(n uint32) {
	s := c.s
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	if c.use.Channels < n {
		panic(fmt.Sprintf("server: invariant broken: orphaning %d channels of a client holding %d", n, c.use.Channels))
	}
	c.use.Channels -= n
	s.orphaned[c.uid] += n
}

// refundOrphan gives back one channel orphan moved to uid: its files are
// gone.
func (s *Server) refundOrphan(uid uint32) {
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	use := s.uidUse[uid]
	if s.orphaned[uid] == 0 || use == nil || use.Channels == 0 {
		panic(fmt.Sprintf("server: invariant broken: refund of an orphaned channel of uid %d, which has none", uid))
	}
	if s.orphaned[uid]--; s.orphaned[uid] == 0 {
		delete(s.orphaned, uid)
	}
	use.Channels--
	if *use == (uapi.Pools{}) {
		delete(s.uidUse, uid)
		delete(s.turns, uid)
	}
}

// refundAll gives back everything the client still holds: its teardown's
// last step, after orphanOwed has handed what it owes to its uid, after
// which it holds nothing.
func (c *client) refundAll() {
	c.s.quotaMu.Lock()
	held := c.use
	c.s.quotaMu.Unlock()
	if held != (uapi.Pools{}) {
		c.refund(held)
	}
}

// allocCharge is the device memory an ALLOC of size bytes with page size
// page takes: size rounded up to the page the driver maps it with (0: the
// largest of 2 MiB and 64 KiB that size fills, else 4 KiB, as
// driver.Context.Alloc chooses). size is at most the device's memory.
func allocCharge(size, page uint64) uint64 {
	if page == 0 {
		page = uint64(abi.Page4K)
		for _, p := range []uint64{uint64(abi.Page2M), uint64(abi.Page64K)} {
			if size >= p {
				page = p
				break
			}
		}
	}
	if p := abi.PageSize(page); p != abi.Page4K && p != abi.Page64K && p != abi.Page2M {
		page = uint64(abi.Page4K) // the driver refuses it; the charge is refunded
	}
	return (size + page - 1) &^ (page - 1)
}

// clientQuota answers CLIENT_QUOTA: the index-th client's use of each
// pool against its limits; its use and its uid's are withheld (zero)
// from a viewer that may not see another user's counters (info.go).
func (s *Server) clientQuota(a *uapi.ClientQuota, viewer *client) error {
	c, err := s.clientAt(a.Index)
	if err != nil {
		return err
	}
	s.settle() // what the driver has given back is not reported as held (owed.go)
	var ctx uint32
	c.mu.Lock()
	if c.ctx != nil { // written under c.mu by attach
		ctx = uint32(c.ctx.ID())
	}
	c.mu.Unlock()
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	*a = uapi.ClientQuota{Index: a.Index, Pid: c.pid, Uid: c.uid, Context: ctx, Use: c.use, Limit: s.clientLimit, UidLimit: s.uidLimit}
	if u := s.uidUse[c.uid]; u != nil {
		a.UidUse = *u
	}
	if withheld(viewer, c) {
		a.Use, a.UidUse = uapi.Pools{}, uapi.Pools{}
	}
	return nil
}

// ANCHOR: tables

// chargeTables brings the client's charge for page tables up to what its
// context's tables take now (driver.Context.TablePages): each call that
// maps reads the count after the driver mapped, and is charged what the
// mapping added — or refunded, if the count went down. Only the client's
// serve goroutine maps and unmaps in its context, and only it charges or
// refunds its pools, so the count cannot move between the read and the
// charge. On ErrQuota the caller undoes its call, which gives the new
// tables back, and calls refundTables.
func (c *client) chargeTables() error {
	held, charged := c.tables()
	switch {
	case held > charged && held-charged > math.MaxUint32:
		return fmt.Errorf("%d page-table pages at once: %w", held-charged, uapi.ErrQuota)
	case held > charged:
		return c.charge(uapi.Pools{PageTables: uint32(held - charged)})
	case held < charged:
		c.refund(uapi.Pools{PageTables: uint32(charged - held)})
	}
	return nil
}

// refundTables gives back the charge for tables the context no longer
// holds: after an unmap (FREE, HOST_UNREGISTER, MANAGED_FREE) or a call
// undone. It refunds the charge less what the context holds, never more
// than was charged. A call the driver fails was never charged, and gives
// back the tables it made itself (mapAt, mapManaged): a managed map the
// pool ran out under once kept them, uncharged, until teardown
// (TestAFailedManagedAllocKeepsNoUnchargedTables).
func (c *client) refundTables() {
	if held, charged := c.tables(); held < charged {
		c.refund(uapi.Pools{PageTables: uint32(charged - held)})
	}
}

// tables returns the table pages the client's context holds and those it
// has been charged for.
func (c *client) tables() (held, charged uint64) {
	held = c.ctx.TablePages()
	c.s.quotaMu.Lock()
	defer c.s.quotaMu.Unlock()
	return held, uint64(c.use.PageTables)
}

// ANCHOR_END: tables
