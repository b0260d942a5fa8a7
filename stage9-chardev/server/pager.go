package server

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

// The pager (MANAGED_PAGER): the daemon answers its clients' page faults
// on managed memory, so that a client touches its managed memory with no
// Sync. In-process this cannot be done (driver.Managed.Sync, cmd/uffdstw):
// a Go program that answers its own userfaultfd stops for good when the
// collector stops the world while a goroutine waits in a fault. Across
// the boundary the answer comes from another process, which the client's
// collector does not stop.
//
// Missing faults, not minor ones. Both would work on a memfd. With minor
// faults the client's page cache keeps a page the device has, and the
// daemon would have to zap the client's page table entry to make the
// next touch fault — which only the client's own madvise can do. With
// missing faults the daemon needs nothing of the client: punching the
// page out of the memfd (fallocate) takes it from every mapping at once,
// the client's included, and the client's next touch is a missing fault.
// The answer is UFFDIO_COPY from a copy of the device frame (Fill): the page
// appears in the memfd whole. Copying through the daemon's own mapping
// of the memfd instead would make the page visible, zeroed, the moment
// the copy began — and a client thread that re-runs its access after a
// signal (Go preempts with SIGURG) reads the zeros; the first version of
// this pager did, and TestPagerHostAndDeviceSeeEachOthersWrites caught
// it.
//
//	client                          daemon                           device
//	------                          ------                           ------
//	                                (fault handler)                  fault on page i
//	                                Protect(i): UFFDIO_WRITEPROTECT
//	                                copy page i → frame
//	write page i: waits (wp fault)  Remove(i): PUNCH_HOLE (by the
//	                                punch helper), lift wp → wake
//	retries: missing fault ───────→ (fault loop) HostFault(i):
//	                                  entry cleared, TLBs invalidated,
//	                                  Fill(i): UFFDIO_COPY frame → page
//	retries: finds the page ←────── (the copy wakes it)

// Who writes what: the client writes its mapping (the memfd's pages) and
// nothing else; the daemon fills a page only with um.mu held, in toHost,
// and changes the client's page tables only through ioctls on the
// client's own userfaultfd, which act on the client's address space and
// nobody else's — inside the range the client registered, checked
// against the allocation's.
//
// Isolation: a fault address outside [Base, Base+Length) is counted and
// not answered; the daemon never waits for a client's help (its ioctls
// and fallocate need none, and it never writes the liveness socket), so
// a client that never retries its faults costs the daemon nothing. But
// these calls do take the client's own kernel locks: the ioctls its mmap
// lock, fallocate its memfd's inode lock. The mmap lock a client can
// hold for as long as one system call of its own lasts — an mprotect
// over tens of thousands of populated mappings holds it for writing for
// a sizeable fraction of a second, and a thread can do it again and
// again (TestAStrangersMmapLockStallsNoOtherClient); the inode lock, if
// it may make kernel-mode userfaultfds, for good
// (TestAStrangerHoldingItsMemfdLockCannotWedgeSIGTERM). The driver makes
// the calls with its managed-memory lock (um.mu) held, and the fault
// loop makes some for every client, so each is bounded (bounded): one
// that takes longer than pagerBound fails, its client is dropped, and its
// uid is barred from the pager (pagerBars). The fallocate is made by a
// helper process (punch.go), so that one stuck for good holds the
// helper, not a thread of the daemon's, which would keep the daemon's
// process from ending. A fault moves at most the host's window of pages
// (driver/pager.go, hostWindow). What the client does hold is the
// userfaultfd's open file description, and its O_NONBLOCK flag, which
// the kernel's poll and read of it obey: the pager's read does not wait
// whatever the flag says, and a client that clears it — its faults can
// no longer be waited for — is dropped.
//
// Failure is loud: the call carries one end of a socket pair whose other
// end the client has armed with O_ASYNC, F_SETOWN (itself) and F_SETSIG
// (SIGKILL) (client/pager.go). The daemon holds its end as long as the
// pager lives; the client disarms its end before it frees the allocation
// or closes. When the daemon dies the kernel closes the daemon's end, the
// client's end signals, and the client is killed — rather than waiting
// forever in a fault nobody will answer, or (had the client closed its
// userfaultfd) reading zero pages.

// pagers is one client's pagers; guarded by mu.
type pagers struct {
	mu     sync.Mutex
	byVA   map[uint64]*pager
	memfds map[uint64]int // VA → the daemon's duplicate of each MANAGED_ALLOC memfd
}

// pager serves one managed allocation's host faults.
type pager struct {
	m       *driver.Managed
	uffd    int    // the daemon's duplicate of the client's userfaultfd, non-blocking: read by the fault loop
	memfd   int    // the allocation's memfd: where pages are punched out
	live    int    // the daemon's end of the client's liveness socket pair: closed last
	base    uint64 // the client's mapping of it
	length  uint64
	loop    *faultLoop       // the daemon's (faultloop.go)
	id      uint32           // its key in loop.byID, and its epoll events' data
	drop    func(why string) // ends the client: closes its connection, and its teardown frees its memory
	uid     uint32           // the client's
	bars    *pagerBars       // the daemon's: a uid barred from the pager has no call made (bounded)
	punches *puncher         // the daemon's: the helper processes that punch for Remove (punch.go)

	// serving is held by the fault loop while it reads and answers this
	// pager's faults; stopPager takes it to know that no answer is under
	// way, and sets stopped: the loop, holding it, reads stopped first.
	serving sync.Mutex
	stopped bool   // guarded by serving
	last    []byte // the previous read's messages, for replayFaults; the loop's

	// calls guards the calls into the client's memory that bounded
	// started and may have left running: uffd and memfd stay open until
	// the last of them returns, so that none acts on a descriptor number
	// the daemon has since given to another client.
	calls struct {
		sync.Mutex
		running int  // started, not returned
		stuck   bool // one outlived pagerBound, or the uid was barred or spent its share: no more are made
		closing bool // stopPager is done with the descriptors
		// keepMemfd: the memfd stays open when the descriptors are
		// closed — a pager that never started (managedPager's failure
		// after SetPager), whose memfd is still the client's kept one.
		keepMemfd bool
	}
}

// keepMemfd keeps a duplicate of a managed allocation's memfd, for a
// pager the client may ask for later. The caller still closes fd.
func (c *client) keepMemfd(va uint64, fd int) error {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("keeping the memfd: %v: %w", err, uapi.ErrNoMemory)
	}
	c.pg.mu.Lock()
	defer c.pg.mu.Unlock()
	if c.pg.memfds == nil {
		c.pg.memfds, c.pg.byVA = map[uint64]int{}, map[uint64]*pager{}
	}
	c.pg.memfds[va] = dup
	return nil
}

// ANCHOR: managedpager

// managedPager makes the daemon the pager of the client's allocation at
// a.VA: it checks what the client sent, takes every page home
// (SetPager), and puts the client's userfaultfd in the daemon's fault
// loop (faultloop.go).
func (c *client) managedPager(a *uapi.ManagedPager, uffdFD, livenessFD int) error {
	c.mu.Lock()
	m, ok := c.managed[a.VA]
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("MANAGED_PAGER of %#x, not managed memory of this client: %w", a.VA, uapi.ErrNoEntry)
	}
	switch {
	case a.Flags&^uapi.PagerUserModeOnly != 0:
		return fmt.Errorf("MANAGED_PAGER flags %#x: %w", a.Flags, uapi.ErrInval)
	case a.Base == 0 || a.Base%(1<<abi.PageShift) != 0 || a.Length != roundPage(m.Size()) || a.Base+a.Length < a.Base:
		return fmt.Errorf("MANAGED_PAGER of [%#x, +%d) for %d bytes: %w", a.Base, a.Length, m.Size(), uapi.ErrInval)
	}
	if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", uffdFD)); err != nil || link != "anon_inode:[userfaultfd]" {
		return fmt.Errorf("MANAGED_PAGER: descriptor %d is %q, not a userfaultfd: %w", uapi.PagerFDUffd, link, uapi.ErrInval)
	}
	// A Unix domain socket, because the daemon closes its end when the
	// pager stops, and such a close never waits (discard.go says what
	// other sockets' can do).
	if domain, err := unix.GetsockoptInt(livenessFD, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || domain != unix.AF_UNIX {
		return fmt.Errorf("MANAGED_PAGER: descriptor %d is not a Unix domain socket: %w", uapi.PagerFDLiveness, uapi.ErrInval)
	}
	// One end of a socket pair, whose peer has no name: not a connection
	// to a listening socket — above all not the client's own end of its
	// connection to the node, which the daemon holding would keep open
	// after the client's exit.
	if peer, err := unix.Getpeername(livenessFD); err != nil {
		return fmt.Errorf("MANAGED_PAGER: descriptor %d is not connected: %w", uapi.PagerFDLiveness, uapi.ErrInval)
	} else if sa, ok := peer.(*unix.SockaddrUnix); !ok || (sa.Name != "" && sa.Name != "@") { // x/sys writes no name as "@"
		return fmt.Errorf("MANAGED_PAGER: descriptor %d is connected to a named socket, not one end of a socket pair: %w", uapi.PagerFDLiveness, uapi.ErrInval)
	}
	// The range must be registered, in write-protect mode, with this
	// userfaultfd in the process that made it: lifting protection on a
	// range that is not fails. It wakes nobody who matters: no page is
	// protected yet, unless the allocation has a pager already (refused
	// below, ErrBusy) and a move of its is under way, whose protection
	// this lifts — the client's own pages, raced by its own writes.
	if err := uffd.WriteProtect(uffdFD, a.Base, a.Length, false); err != nil {
		return fmt.Errorf("MANAGED_PAGER: [%#x, +%d) is not registered for write-protect faults: %v: %w", a.Base, a.Length, err, uapi.ErrInval)
	}
	if until, barred := c.s.bars.barred(c.uid, time.Now()); barred {
		return fmt.Errorf("MANAGED_PAGER: a client of uid %d held up the pager; it pages none of the uid's memory until %s: %w", c.uid, until.UTC().Format(time.RFC3339), uapi.ErrPerm)
	}
	c.pg.mu.Lock()
	defer c.pg.mu.Unlock()
	memfd, kept := c.pg.memfds[a.VA]
	if !kept {
		return fmt.Errorf("MANAGED_PAGER of %#x: no memfd kept for it: %w", a.VA, uapi.ErrNoEntry)
	}
	if c.pg.byVA[a.VA] != nil {
		return fmt.Errorf("MANAGED_PAGER of %#x: it has a pager already: %w", a.VA, uapi.ErrBusy)
	}
	loop, err := c.s.faultLoop()
	if err != nil {
		return fmt.Errorf("MANAGED_PAGER: %v: %w", err, uapi.ErrNoMemory)
	}
	if err := c.s.punches.ready(); err != nil {
		// A daemon that cannot punch pages out cannot page: ErrPerm, as
		// for a barred uid, and the client goes on without a pager.
		return fmt.Errorf("MANAGED_PAGER: the daemon pages no memory: %v: %w", err, uapi.ErrPerm)
	}
	uffdDup, err := unix.FcntlInt(uintptr(uffdFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("MANAGED_PAGER: %v: %w", err, uapi.ErrNoMemory)
	}
	live, err := unix.FcntlInt(uintptr(livenessFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(uffdDup)
		return fmt.Errorf("MANAGED_PAGER: %v: %w", err, uapi.ErrNoMemory)
	}
	shutRead(live) // discard.go: the daemon never reads it, and from here nothing more can be queued in it
	p := &pager{m: m, uffd: uffdDup, memfd: memfd, live: live, base: a.Base, length: a.Length, loop: loop,
		uid: c.uid, bars: &c.s.bars, punches: &c.s.punches,
		drop: func(why string) {
			c.s.log.Warn("client dropped: "+why, "pid", c.pid, "uid", c.uid)
			hangUp(c.conn) // its serve loop sees EOF and tears it down: stopPager, then the free
		}}
	if err := m.SetPager(p); err != nil {
		unix.Close(uffdDup)
		closeSocket(live)
		return fmt.Errorf("MANAGED_PAGER: %w: %w", err, uapi.ErrNoEntry)
	}
	if err := loop.add(p); err != nil {
		// Calls into the client's memory may have begun since SetPager,
		// and a stuck one may still run: the descriptors go as stopPager's
		// do (release), all but the memfd, which stays the kept one.
		m.SetPager(nil)
		p.calls.Lock()
		p.calls.keepMemfd = true
		p.calls.Unlock()
		p.release()
		closeSocket(live)
		return fmt.Errorf("MANAGED_PAGER: %v: %w", err, uapi.ErrNoMemory)
	}
	c.pg.byVA[a.VA] = p
	return nil
}

// ANCHOR_END: managedpager

// stopPager ends the pager of the allocation at va, if it has one, and
// lets its memfd go: MANAGED_FREE and teardown call it before the free.
func (c *client) stopPager(va uint64) {
	c.pg.mu.Lock()
	p := c.pg.byVA[va]
	delete(c.pg.byVA, va)
	memfd, kept := c.pg.memfds[va]
	delete(c.pg.memfds, va)
	c.pg.mu.Unlock()
	if p != nil {
		p.loop.remove(p)    // no fault of its is read or answered from here on
		p.m.SetPager(nil)   // pages come home, through its userfaultfd: none is a hole once the pager is gone
		p.release()         // the driver's calls ended with SetPager; a stuck one may still run
		closeSocket(p.live) // a client that did not disarm it is killed: it was let go with pages it could fault on
	} else if kept {
		unix.Close(memfd)
	}
}

// pagerBound is how long the daemon waits for one call into a client's
// memory (an ioctl on its userfaultfd, a fallocate on its memfd), counted
// from when the call began. Such a call takes microseconds unless the
// client holds the kernel lock it needs; the driver makes it with um.mu
// held, which every client's managed memory needs, so a client may hold
// that up for this long: then it is dropped, and its uid is barred from
// the pager (pagerBars). Well under the 2 s round trip the hostile
// tests allow a well-behaved client (liveBound, stranger_test.go), and
// far above a call on a loaded machine.
const pagerBound = 100 * time.Millisecond

// errStuck is a call into a client's memory that outlived pagerBound, or
// one not made because an earlier one did, or because the client's uid
// is barred.
var errStuck = errors.New("the client's memory was not reachable within the pager's bound")

// pagerBars bars a uid from the pager for a while after a client of its
// held up a call into its memory. Dropping that client is not enough: a
// stranger that comes back on new connections, or holds many at once,
// would cost every other client's managed memory a pagerBound per
// connection, back to back (TestAStrangerThatRedialsHoldsUpOthersOnce).
// While a uid is barred, no call is made into the memory of any client
// of its — each is dropped at its next call, as its pages cannot move
// without one — and MANAGED_PAGER refuses it (ErrPerm: the client library
// then uses the allocation without a pager, and the host Syncs). The
// first bar lasts barFirst; each new strike while barred, or within the
// bar's length after it ended, doubles it, up to barMost. A call that was
// already stuck when the bar began is the same incident, not a new one:
// a uid's calls may be stuck side by side, and one lock of the client's
// holds them all. So a uid can cost the others about one pagerBound per
// bar: at most one in barFirst, and fewer and fewer as it goes on. The
// uid is the unit because it is the unit of every quota here: a stranger
// cannot make more of them, and its connections, up to MaxConnsPerUID,
// are all its own.
type pagerBars struct {
	mu    sync.Mutex
	byUID map[uint32]pagerBar
	held  map[uint32]pagerShare // each uid's share of the pager, spent: none if not there
	// pruneAt is the size of the two maps at which charge next prunes
	// them: twice what the last prune left.
	pruneAt int
}

// pagerShare is how much of a uid's share of the pager its calls have
// spent, as of at. The bound alone is per call: a stranger whose every
// call waited just under it — its mmap lock held 15 ms at a time, while
// 64 write-protect faults of its own queued at the fault loop — cost the
// other clients' host faults seconds, and was never judged
// (TestAStrangerStallsTheFaultLoopUnderTheBound). So the time a uid's
// calls wait also fills a bucket, which drains at a shareLeak-th of the
// time: a call may take only what is left below pagerBound, and a uid
// whose calls fill it is judged as for a stuck call.
//
// Waited, not took (offCPU): a call's time less the CPU time its thread
// ran in it — the call's own work, copying pages, punching them out,
// waiting for other CPUs to drop their mappings — and less the time it
// waited for a core, which is the machine's load; nothing at all if the
// thread never slept in it. Charged its whole time, a client busy with its own
// managed memory spent its share on that work alone, and so did a light
// one beside another uid that only copied memory on four threads and
// slowed and preempted everyone's copies; both were dropped
// (TestABusyClientAloneKeepsItsShare, TestMemoryCopyLoadBarsNoClient).
// What is charged is the time a call slept: on a lock — the client's,
// which is the point — or on the kernel's. A stranger that holds its
// locks costs the others at most a shareLeak-th of their time, and is
// barred as soon as it takes more.
type pagerShare struct {
	level time.Duration
	at    time.Time
}

// shareLeak: a uid's share drains at a shareLeak-th of the time. What a
// uid under it costs the others is more than that, as their faults queue
// behind its calls: a stranger asleep in its calls 8 % of the time cost
// a well-behaved client's host reads about a fifth of their time more
// (TestAUidUnderTheDrainCostsOthersItsShare). A twentieth judges that
// stranger, and a well-behaved client's calls hardly sleep at all.
const shareLeak = 20

// drained is s as of now.
func (s pagerShare) drained(now time.Time) pagerShare {
	if !s.at.IsZero() && now.After(s.at) {
		s.level = max(0, s.level-now.Sub(s.at)/shareLeak)
	}
	s.at = now
	return s
}

// left returns what is left of uid's share at now: how long its next call
// may take.
func (b *pagerBars) left(uid uint32, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return pagerBound - b.held[uid].drained(now).level
}

// charge adds a call of uid's that took took to its share, at now, and
// reports whether that spent the share.
func (b *pagerBars) charge(uid uint32, now time.Time, took time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.held[uid].drained(now)
	s.level += took
	if s.level <= 0 {
		delete(b.held, uid)
		return false
	}
	if b.held == nil {
		b.held = make(map[uint32]pagerShare)
	}
	b.held[uid] = s
	if len(b.held)+len(b.byUID) > max(pruneAbove, b.pruneAt) {
		b.prune(now)
		b.pruneAt = 2 * (len(b.held) + len(b.byUID)) // so that a sweep costs each charge O(1), however many uids are active
	}
	return s.level >= pagerBound
}

// pruneAbove is how many uids' shares and bars pagerBars keeps before it
// lets go of those that have run their course.
const pruneAbove = 64

// prune forgets the shares that have drained and the bars past the
// window in which a strike would double them: a uid with neither is as
// if it had never been seen. Without it, each uid that ever had a call
// stayed for good — a stranger with a range of uids could grow the maps
// without bound. The caller holds b.mu.
func (b *pagerBars) prune(now time.Time) {
	for uid, s := range b.held {
		if s.drained(now).level <= 0 {
			delete(b.held, uid)
		}
	}
	for uid, bar := range b.byUID {
		if now.After(bar.until.Add(bar.last)) {
			delete(b.byUID, uid)
		}
	}
}

// pagerBar is one uid's bar.
type pagerBar struct {
	since time.Time     // the latest bar began then
	until time.Time     // barred until then
	last  time.Duration // the length of the latest bar
}

const (
	barFirst = 10 * time.Second
	barMost  = time.Hour
)

// barred reports whether uid is barred at now, and until when.
func (b *pagerBars) barred(uid uint32, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bar, ok := b.byUID[uid]
	return bar.until, ok && now.Before(bar.until)
}

// strike bars uid from now, for a call of its begun at began that is
// stuck: for barFirst, or for twice the latest bar if the strike comes
// while it lasts or within its length after. A call begun before the
// current bar did is part of the incident that set it, and changes
// nothing. It returns the end of the bar.
func (b *pagerBars) strike(uid uint32, now, began time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byUID == nil {
		b.byUID = make(map[uint32]pagerBar)
	}
	bar := b.byUID[uid]
	if now.Before(bar.until) && began.Before(bar.since) {
		return bar.until
	}
	length := barFirst
	if bar.last > 0 && now.Before(bar.until.Add(bar.last)) {
		length = min(2*bar.last, barMost)
	}
	bar.since, bar.until, bar.last = now, now.Add(length), length
	b.byUID[uid] = bar
	return bar.until
}

// bounded runs call, which may block in the kernel on a lock the client
// holds, with p's descriptors, and waits for it at most what is left of
// its uid's share of the pager (pagerShare: pagerBound, less what the
// uid's recent calls waited asleep) from when it began; what the call
// waited is then charged to the share, and a uid that spends it is judged as for a
// stuck call. The call runs on a goroutine of its own, so that a call
// that outlives the bound is left running, holding a thread until the
// client lets go, rather than holding up the caller — um.mu, or the fault
// loop, which every client needs. Its late effects reach only the
// client's own mapping and memfd (and the bytes it copies are the
// caller's own, never device frames: driver.Pager's Fill), and the client is dropped: the first
// call to outlive the bound drops it, strikes its uid (pagerBars), and no
// further call is made. The bound counts from the call's start, not from
// the hand-off: a goroutine the daemon's own load keeps from its core is
// not the client's doing.
//
// What a call left running still holds is its thread, and a thread
// asleep uninterruptibly in the kernel keeps its process from ending,
// SIGKILL or not. The userfaultfd ioctls sleep only as long as one system
// call of the client's; the fallocate that punches pages out of the memfd
// can sleep for good, on the memfd's inode lock, which a client allowed
// kernel-mode userfaultfds holds as long as it likes. So the punch is
// made in a helper process (punch.go), and for it the bound counts from
// when the helper began (pagerCall.span): a stuck helper is let go, and
// the daemon's own threads never sleep on a client's lock for good.
//
// The hand-off to the goroutine and back costs every call: a sparse
// touch (ManagedPager/touch=sparse/path=pager) took about 109 µs against
// 90 µs with every call made on its caller (medians of six runs of each
// build in turn, on a 2-vCPU Intel Xeon guest; scratch runs, in no
// record).
func (p *pager) bounded(what pagerCall, call func(uffd, memfd int) error) error {
	p.calls.Lock()
	if p.calls.stuck || p.calls.closing {
		p.calls.Unlock()
		return errStuck
	}
	limit := pagerBound // how long this call may take: what is left of its uid's share
	if p.bars != nil {
		now := time.Now()
		if _, barred := p.bars.barred(p.uid, now); barred {
			p.calls.stuck = true
			p.calls.Unlock()
			if p.drop != nil {
				p.drop("its uid is barred from the pager: a client of the uid held up a call into its memory")
			}
			return errStuck
		}
		limit = p.bars.left(p.uid, now)
	}
	p.calls.running++
	p.calls.Unlock()
	done := make(chan error, 1)
	var began, ended atomic.Int64     // the call's start and end, in time.Now's UnixNano; 0 until then
	var waited atomic.Int64           // what the call waited (offCPU), ns
	var thread atomic.Pointer[offCPU] // the call's thread, as it began: the bound asks whether it has slept since
	go func() {
		runtime.LockOSThread() // offCPU reads the call's thread
		off := startOffCPU()
		thread.Store(&off)
		began.Store(time.Now().UnixNano())
		err := call(p.uffd, p.memfd)
		waited.Store(int64(off.waited()))
		ended.Store(time.Now().UnixNano())
		runtime.UnlockOSThread()
		p.calls.Lock()
		p.calls.running--
		last := p.calls.closing && p.calls.running == 0
		p.calls.Unlock()
		if last {
			p.closeDescriptors()
		}
		done <- err
	}()
	// span is when the call began and ended, each the zero time if not yet.
	span := func() (start, end time.Time) {
		if what.span != nil {
			return what.span()
		}
		if at := began.Load(); at != 0 {
			start = time.Unix(0, at)
		}
		if at := ended.Load(); at != 0 {
			end = time.Unix(0, at)
		}
		return start, end
	}
	// answered charges the time the call waited to its uid's share, and
	// judges the uid if that spent it.
	answered := func(err error) error {
		start, end := span()
		if p.bars == nil || start.IsZero() {
			return err
		}
		var w time.Duration
		switch {
		case end.IsZero():
			w = time.Since(start) // a helper lost in the middle of its call: all of it counts
		case what.waited != nil:
			w = what.waited()
		default:
			w = time.Duration(waited.Load())
		}
		if p.bars.charge(p.uid, time.Now(), w) {
			p.judge(fmt.Sprintf("the pager cannot reach its memory: its uid's calls into its memory waited more than its share (%v at a time, draining at a %dth of the time), %v the last, %v", pagerBound, shareLeak, w.Round(time.Microsecond), what), start)
		}
		return err
	}
	// Each time the timer fires, in this order:
	//   - the answer is there (it may race the timer): charge it, return;
	//   - the call has not begun (its goroutine, or the helper, waits
	//     for a core): the daemon's load — wait another bound;
	//   - it ended within limit, its answer on its way: likewise;
	//   - it runs on a thread of ours that is not asleep (running, or
	//     waiting for a core; not on the client's lock): likewise; asleep,
	//     but for less than limit in all: wait the rest of limit — a call
	//     in the helper is judged by its time alone;
	//   - limit has not yet passed since it began (the timer was set
	//     from earlier): wait the rest;
	//   - else it is stuck: judge the client.
	timer := time.NewTimer(max(limit, 0))
	defer timer.Stop()
	var start time.Time // when the call began
	for {
		select {
		case err := <-done:
			return answered(err)
		case <-timer.C:
		}
		select { // the answer and the timer both ready: the answer
		case err := <-done:
			return answered(err)
		default:
		}
		var end time.Time
		start, end = span()
		if start.IsZero() {
			timer.Reset(pagerBound) // not begun: the daemon's load, not the client
			continue
		}
		if !end.IsZero() && end.Sub(start) <= limit {
			timer.Reset(pagerBound) // done in time, its answer on its way: the daemon's load
			continue
		}
		if what.span == nil && end.IsZero() {
			if off := thread.Load(); off != nil {
				// A call on a thread of ours is stuck only if it has
				// slept limit (offCPU.asleep). Running, or waiting for a
				// core, it is not asleep on the client's lock: a 400-thread
				// CPU hog of another uid, under the race detector, kept
				// a well-behaved client's copy off its core past the
				// bound (TestCPULoadBarsNoBusyClient). (The helper's
				// fallocate is judged by its time alone: a writer waiting
				// for the inode lock may spin without sleeping while the
				// holder runs.)
				if now, slept := off.asleep(); !now {
					timer.Reset(pagerBound)
					continue
				} else if slept < limit {
					timer.Reset(limit - slept)
					continue
				}
			}
		}
		if left := time.Until(start.Add(limit)); left > 0 {
			timer.Reset(left)
			continue
		}
		break
	}
	p.judge(fmt.Sprintf("the pager cannot reach its memory: %v outlived %v (what was left of its uid's share of %v)", what, limit.Round(time.Microsecond), pagerBound), start)
	return errStuck
}

// judge drops p's client for a call into its memory, begun at start,
// that was stuck or spent its uid's share, and strikes the uid
// (pagerBars). No further call is made into the client's memory, and
// only the first judgement drops it.
func (p *pager) judge(why string, start time.Time) {
	p.calls.Lock()
	first := !p.calls.stuck
	p.calls.stuck = true
	p.calls.Unlock()
	if first && p.drop != nil {
		if p.bars != nil {
			why += "; its uid is barred from the pager until " + p.bars.strike(p.uid, time.Now(), start).UTC().Format(time.RFC3339)
		}
		p.drop(why) // it only closes the connection: the teardown, which takes um.mu, runs on the client's serve goroutine
	}
}

// pagerCall names a call bounded makes, for the log when it outlives the
// bound: formatted only then, so that a call that returns in time costs
// no allocation for its name.
type pagerCall struct {
	op          string
	page, pages int
	// span, if set, says when the call began and ended in another process
	// (the punch helper's fallocate: punch.go), each the zero time if it
	// has not: the bound counts from its start, and a call that ended
	// within it is waited for, whatever the hand-off back costs. Unset,
	// the bound counts from when bounded's goroutine made the call.
	span func() (began, ended time.Time)
	// waited, set with span, says what the call waited in the other
	// process (offCPU): what is charged to the share.
	waited func() time.Duration
}

func (c pagerCall) String() string {
	if c.pages == 1 {
		return fmt.Sprintf("%s page %d", c.op, c.page)
	}
	return fmt.Sprintf("%s pages [%d, +%d)", c.op, c.page, c.pages)
}

// release closes p's userfaultfd and memfd once no call bounded started
// still runs; the last such call closes them otherwise.
func (p *pager) release() {
	p.calls.Lock()
	p.calls.closing = true
	idle := p.calls.running == 0
	p.calls.Unlock()
	if idle {
		p.closeDescriptors()
	}
}

// closeDescriptors closes the daemon's duplicates of the client's
// userfaultfd and memfd: release's, once.
func (p *pager) closeDescriptors() {
	unix.Close(p.uffd)
	p.calls.Lock()
	keep := p.calls.keepMemfd
	p.calls.Unlock()
	if !keep {
		unix.Close(p.memfd)
	}
}

// ANCHOR: servefaults

// serveReady reads the fault messages waiting on p's userfaultfd and
// answers each; the fault loop (faultloop.go) calls it when epoll says
// the descriptor is ready, events being what it said. A fault inside the
// allocation brings its page home if the device has it (HostFault: a
// duplicate moves nothing), then lifts write protection on the page,
// which wakes every thread waiting on it. A fault outside is not
// answered. It returns why the client must be dropped, or "" to go on:
// its descriptor can no longer be read, or it delivered an event the
// client library never asks for.
func (p *pager) serveReady(buf []byte, events uint32) (drop string) {
	p.serving.Lock()
	defer p.serving.Unlock()
	if p.stopped {
		return "" // stopPager's: a readiness reported before it
	}
	if events&unix.EPOLLERR != 0 {
		// The client broke the descriptor (read says how). Nothing is
		// read from it, so no fork event installs a descriptor here.
		return "its userfaultfd reports an error, not faults"
	}
	n, err := p.read(buf)
	switch {
	case err != nil && !errors.Is(err, syscall.EAGAIN):
		return "its userfaultfd cannot be read: " + err.Error()
	case err != nil:
		return "" // EAGAIN: nothing to read after all
	}
	if replayFaults.Load() {
		for off := 0; off+uffd.MsgSize <= len(p.last); off += uffd.MsgSize {
			p.serve(p.last[off : off+uffd.MsgSize])
		}
		p.last = append(p.last[:0], buf[:n]...)
	}
	if !p.serveAll(buf[:n]) {
		return "its userfaultfd delivered an event the client library never asks for"
	}
	return ""
}

// serveAll serves the messages of one read, in order, and reports false
// at the first that is not a fault: the client asked for events itself,
// so its descriptor is not one the client library made. The messages
// after it are not served, but the descriptor of every fork event among
// them is closed: the kernel installed them all in this process when it
// copied the messages out (TestEveryForkEventOfAReadHasItsDescriptorClosed).
func (p *pager) serveAll(msgs []byte) bool {
	for off := 0; off+uffd.MsgSize <= len(msgs); off += uffd.MsgSize {
		if !p.serve(msgs[off : off+uffd.MsgSize]) {
			for off += uffd.MsgSize; off+uffd.MsgSize <= len(msgs); off += uffd.MsgSize {
				if fd, ok := uffd.ForkDescriptor(msgs[off : off+uffd.MsgSize]); ok {
					unix.Close(fd)
				}
			}
			return false
		}
	}
	return true
}

// read reads the fault messages waiting, at most len(buf) of them: EAGAIN
// if there are none (another reader of the readiness took them, or the
// fault was a spurious one). The userfaultfd's open file description is
// the client's too, and so is its O_NONBLOCK flag. A plain read(2) obeys
// the flag: with it cleared, the read would sleep in the kernel, and the
// fault loop with it, for every client; RWF_NOWAIT makes this read
// non-blocking whatever the flag says (the fault loop starts only on a
// kernel that takes it: readsWithoutWaiting). The kernel's poll of a userfaultfd
// obeys the flag too: without O_NONBLOCK it reports an error (EPOLLERR),
// not readiness, and serveReady drops the client
// (TestPagerDropsAClientWhoseFaultsItCannotRead).
func (p *pager) read(buf []byte) (n int, err error) {
	for {
		n, err = unix.Preadv2(p.uffd, [][]byte{buf}, -1, unix.RWF_NOWAIT)
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// replayFaults, a test hook, has serveReady serve every message a second
// time with the next read — by then the client has had its page, and may
// have written it — as the kernel may deliver a fault twice.
var replayFaults atomic.Bool

// serve answers one fault message, and reports false for a message that
// is not a fault. Such a message is an event (fork, remap, remove, unmap)
// that only a userfaultfd set up with UFFD_FEATURE_EVENT_* delivers; the
// client library asks for none, so the client built its descriptor itself,
// and its pager stops. A fork event carries a new userfaultfd that the
// kernel installed in this process when it was read: it is closed here, or
// a client forking in a loop would run the daemon out of descriptors.
func (p *pager) serve(msg []byte) bool {
	f, err := uffd.Decode(msg)
	if err != nil {
		if fd, ok := uffd.ForkDescriptor(msg); ok {
			unix.Close(fd)
		}
		return false
	}
	if f.Address < p.base || f.Address-p.base >= p.length {
		pagerOutside.Add(1)
		return true
	}
	page := (f.Address - p.base) >> abi.PageShift
	// A page that came back through Fill is awake already: UFFDIO_COPY
	// wakes every thread waiting on it. Otherwise — a duplicate, a write
	// to a page at home but protected, a Fill that failed — the waiters
	// are woken here. HostFault fails only for a freed allocation, which
	// this cannot be: stopPager, which runs before any free, waits for
	// serveReady (remove takes the serving lock).
	if woken, _ := p.m.HostFault(int(page), f.Flags&uffd.FlagWP == 0); !woken {
		p.wake(int(page), 1)
	}
	return true
}

// pagerOutside counts fault messages, of every pager, whose address was
// outside their allocation: not answered. For tests (export_pager_test.go).
var pagerOutside atomic.Uint64

// ANCHOR_END: servefaults

// wake lifts write protection on the n pages from page i of the client's
// mapping, which wakes the threads waiting on them; if the kernel refuses
// (EAGAIN while the client's address space is changing), a plain wake
// does it. A bounded call of its own: the fault loop and the driver (with
// um.mu held) call it, and every client needs both.
func (p *pager) wake(i, n int) error {
	return p.bounded(pagerCall{op: "UFFDIO_WRITEPROTECT (off) of", page: i, pages: n}, func(fd, _ int) error {
		p.wakeOn(fd, i, n)
		return nil
	})
}

// wakeOn is wake of the n pages from page i, on fd, the descriptor
// bounded passes its call.
func (p *pager) wakeOn(fd int, i, n int) {
	addr, length := p.base+uint64(i)<<abi.PageShift, uint64(n)<<abi.PageShift
	if err := uffd.WriteProtect(fd, addr, length, false); err != nil {
		uffd.Wake(fd, addr, length)
	}
}

// Protect write-protects the n pages from page i in the client, with one
// ioctl (driver.Pager). EAGAIN — the client's address space is changing
// under a fork or mremap — is tried again a few times; then the pages
// are not moved.
func (p *pager) Protect(i, n int) error {
	addr, length := p.base+uint64(i)<<abi.PageShift, uint64(n)<<abi.PageShift
	return p.bounded(pagerCall{op: "UFFDIO_WRITEPROTECT of", page: i, pages: n}, func(fd, _ int) error {
		var err error
		for range 8 {
			if err = uffd.WriteProtect(fd, addr, length, true); !errors.Is(err, syscall.EAGAIN) {
				break
			}
		}
		return err
	})
}

// Fill puts the pages from i back into the memfd, whole, with one
// UFFDIO_COPY of the run into the client's mapping, which wakes the
// client's waiting threads (driver.Pager). EAGAIN is tried again a few
// times for the pages not yet filled, as in Protect.
func (p *pager) Fill(i int, src []byte) error {
	addr := p.base + uint64(i)<<abi.PageShift
	return p.bounded(pagerCall{op: "UFFDIO_COPY of", page: i, pages: len(src) >> abi.PageShift}, func(fd, _ int) error {
		var err error
		for range 8 {
			var filled uint64
			filled, err = uffd.Copy(fd, addr, src)
			addr, src = addr+filled, src[filled:]
			if !errors.Is(err, syscall.EAGAIN) {
				break
			}
		}
		return err
	})
}

// ANCHOR: remove

// Remove punches the n pages from page i out of the memfd — out of the
// client's mapping and the daemon's alike — and lifts their write
// protection, waking a writer that waited: its retry is a missing fault
// (driver.Pager). The punch is made by a helper process (punch.go),
// taken before the bound's clock starts: starting one is the daemon's
// cost, not the client's. The wake is a call of its own, bounded from
// its own start: made inside the punch's call, it ran after the helper's
// clock said the call had ended in time, and a stranger that took its
// mmap lock at that moment held um.mu as long as it liked, never judged
// stuck (TestAStrangerStallsOthersInTheWakeAfterItsPunch).
func (p *pager) Remove(i, n int) error {
	h, err := p.punches.take()
	if err != nil {
		return fmt.Errorf("punching pages [%d, +%d): %w", i, n, err)
	}
	off, length := int64(i)<<abi.PageShift, int64(n)<<abi.PageShift
	// h is the call's if the call begins, and this function's if bounded
	// returns without making it (the pager stuck or closing, the uid
	// barred): whichever claims it first gives it back or lets it go.
	var claimed atomic.Bool
	// The helper's clock as the call left it, kept before h is given
	// back: after that, another punch may take h and clear its clock, or
	// its reaper unmap it, and bounded, which reads the clock once the
	// call has returned (to charge the uid's share), would find nothing.
	type reading struct {
		began, ended time.Time
		waited       time.Duration
	}
	var kept atomic.Pointer[reading]
	span := func() (time.Time, time.Time) {
		if r := kept.Load(); r != nil {
			return r.began, r.ended
		}
		return h.span()
	}
	waited := func() time.Duration {
		if r := kept.Load(); r != nil {
			return r.waited
		}
		return h.waited()
	}
	err = p.bounded(pagerCall{op: "fallocate (punch) of", page: i, pages: n, span: span, waited: waited}, func(_, memfd int) error {
		if !claimed.CompareAndSwap(false, true) {
			return errStuck
		}
		// Patience past the bound: bounded has given up by then, and
		// the helper, stuck on the client's lock, is let go.
		err := h.punch(memfd, off, length, 2*pagerBound)
		began, ended := h.span()
		kept.Store(&reading{began, ended, h.waited()})
		if errors.Is(err, errHelperLost) {
			p.punches.lose(h)
		} else {
			p.punches.give(h)
		}
		if err != nil {
			return fmt.Errorf("punching pages [%d, +%d): %w", i, n, err)
		}
		return nil
	})
	if claimed.CompareAndSwap(false, true) {
		p.punches.give(h) // bounded made no call
	}
	if err != nil {
		return err
	}
	return p.wake(i, n)
}

// ANCHOR_END: remove
