package server

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
)

// The fault loop: one goroutine of the daemon that waits in
// epoll_wait(2) on every pager's userfaultfd and answers the faults
// (pager.serveReady). A host touch of a page the device has is a round
// trip through this process — the kernel wakes a waiter here with the
// fault, the answer wakes the client's thread — and this loop is the
// waiter. It is not locked to its thread (run says why). The first pager
// waited in the Go runtime's network poller, a goroutine per pager: the
// same epoll underneath, but a fault's arrival then woke the runtime's
// poller thread, which handed the goroutine to a P, and on this two-core
// machine, with the engines' threads spinning after the device's work,
// that hand-off cost more than the whole bare round trip
// (Baseline/op=uffdfault/path=process): a sparse touch took 385 µs
// against 249 for this loop, then locked to its thread, at the median of
// six runs each in turn (commit b5c0a7e's scratch runs, in no record).
// One loop for all pagers, not one each: a loop waiting in epoll_wait
// holds an OS thread, and a client can make as many managed allocations
// as its device memory allows, so a loop each would let it make the
// daemon's threads. One loop serialises nothing that was parallel: every
// answer takes the driver's managed-memory lock (um.mu) anyway. Each
// readiness is served by one read of at most 16 messages, so a client
// whose threads fault without pause gets a turn, not the loop.
//
// Who may stop what: the loop reads a pager's descriptor only with the
// pager's serving lock held and stopped unset; stopPager takes the lock,
// sets stopped, and takes the descriptor out of epoll (remove), so after
// remove returns no fault of that pager is read or answered, and its
// descriptor may be closed. The loop itself is stopped by Server.Close,
// after every client's teardown has removed its pagers.
type faultLoop struct {
	epfd int // the epoll instance
	stop int // an eventfd: a write ends run

	mu   sync.Mutex
	byID map[uint32]*pager // guarded by mu; the epoll events' data names a pager by its id
	next uint32            // guarded by mu: the last id given
	done chan struct{}     // closed when run returns
}

// stopID is the epoll data of the stop eventfd: no pager's id.
const stopID = 0

// faultLoop returns the daemon's fault loop, starting it with the first
// pager: a daemon whose clients never ask for one has no such loop.
func (s *Server) faultLoop() (*faultLoop, error) {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	if s.faults != nil {
		return s.faults, nil
	}
	select {
	case <-s.closed:
		return nil, errors.New("the daemon is closing")
	default:
	}
	if err := readsWithoutWaiting(); err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, stop, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: stopID}); err != nil {
		unix.Close(stop)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	l := &faultLoop{epfd: epfd, stop: stop, byID: map[uint32]*pager{}, done: make(chan struct{})}
	go l.run(s)
	s.faults = l
	return l, nil
}

// readsWithoutWaiting checks, on a userfaultfd of the daemon's own, that
// this kernel reads one with RWF_NOWAIT (pager.read): a userfaultfd with
// no read_iter, as in older kernels, refuses the flag (EOPNOTSUPP), and a
// plain read obeys the client's O_NONBLOCK, which the client may clear —
// the fault loop would then sleep in the read, for every client, and
// shutdown with it. Where it cannot, the daemon pages no memory.
func readsWithoutWaiting() error {
	fd, err := uffd.Open(uffd.UserModeOnly, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, uffd.MsgSize)
	_, err = unix.Preadv2(fd, [][]byte{buf}, -1, unix.RWF_NOWAIT)
	if errors.Is(err, syscall.EAGAIN) {
		return nil // nothing queued, and it said so at once
	}
	return fmt.Errorf("this kernel cannot read a userfaultfd without waiting (preadv2 RWF_NOWAIT: %v)", err)
}

// stopFaultLoop ends the fault loop, if it was started, and waits for it.
// Server.Close calls it once every client is torn down.
func (s *Server) stopFaultLoop() {
	s.faultsMu.Lock()
	l := s.faults
	s.faultsMu.Unlock()
	if l == nil {
		return
	}
	unix.Write(l.stop, []byte{1, 0, 0, 0, 0, 0, 0, 0}) // an eventfd adds the 8-byte count: 1
	<-l.done
	unix.Close(l.stop)
	unix.Close(l.epfd)
}

// add gives p an id and puts its userfaultfd in epoll: level-triggered,
// so a readiness the loop served only in part is reported again.
func (l *faultLoop) add(p *pager) error {
	l.mu.Lock()
	for {
		l.next++
		if l.next != stopID && l.byID[l.next] == nil {
			break
		}
	}
	p.id = l.next
	l.byID[p.id] = p
	l.mu.Unlock()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, p.uffd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p.id)}); err != nil {
		l.forget(p) // not in epoll: nothing to take out
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// remove stops the loop serving p: it waits for an answer under way,
// then no readiness of p's is acted on again. It may be called twice, in
// either order: the loop drops a client whose descriptor it cannot read,
// and the client's teardown stops its pagers. Only the first takes the
// descriptor out of epoll, under the serving lock, while the descriptor
// is still p's: after it, the teardown closes it, and the next
// MANAGED_PAGER may get the same number, which a second EPOLL_CTL_DEL
// would take out of epoll for that pager
// (TestALateRemoveLeavesTheNextPagerServed).
func (l *faultLoop) remove(p *pager) {
	p.serving.Lock()
	first := !p.stopped
	p.stopped = true
	if first {
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, p.uffd, nil)
	}
	p.serving.Unlock()
	l.forget(p)
}

// forget takes p out of byID. An event epoll_wait had already returned
// for it finds stopped set, or no pager.
func (l *faultLoop) forget(p *pager) {
	l.mu.Lock()
	if l.byID[p.id] == p {
		delete(l.byID, p.id)
	}
	l.mu.Unlock()
}

// ANCHOR: faultloop

// run is the loop: wait, then serve each ready pager once, until the stop
// eventfd is written. A pager whose client must be dropped (serveReady
// says why) is taken out of epoll first — its descriptor would be reported
// again at once, level-triggered — and then dropped; the client's
// teardown removes it for good.
func (l *faultLoop) run(s *Server) {
	// Not locked to its thread. It was, once: the thread the fault woke
	// from epoll_wait then ran the answer with no hand-off, and unlocked
	// the loop took about three times as long per sparse touch
	// (ManagedPager/touch=sparse/path=pager, medians 405 µs against
	// 131 µs when that was written; scratch runs, in no record). Since
	// every call into a client's memory is bounded (pager.go), the answer
	// hands off to a goroutine anyway, and from a locked thread that
	// hand-off switches OS threads both ways, where from an unlocked one
	// the same thread runs the call: the sparse touch took about 107 µs
	// unlocked against 122 µs locked, the code otherwise the same (medians
	// of six runs of each build in turn, on a 2-vCPU Intel Xeon guest;
	// scratch runs, in no record).
	defer close(l.done)
	events := make([]unix.EpollEvent, 16)
	buf := make([]byte, 16*uffd.MsgSize)
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Not reachable with a valid epoll descriptor and buffer; if
			// it were, every client's faults would go unanswered: say so.
			s.log.Error("the fault loop stopped: no host fault will be answered", "err", err)
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == stopID {
				return
			}
			l.mu.Lock()
			p := l.byID[uint32(ev.Fd)]
			l.mu.Unlock()
			if p == nil {
				continue
			}
			if why := p.serveReady(buf, ev.Events); why != "" {
				l.remove(p)
				p.drop(why)
			}
		}
	}
}

// ANCHOR_END: faultloop
