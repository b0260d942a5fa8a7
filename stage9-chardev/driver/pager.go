package driver

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"

	"softgpu/stage9-chardev/abi"
)

// The pager hook: managed memory whose host side is trapped by a second
// process. In-process, the host cannot be trapped (Sync says why), and a
// page the device takes stays readable, stale, in the host region. When
// the daemon serves a client (server/pager.go), the client's mapping is
// registered with a userfaultfd the daemon reads, and the daemon installs
// a Pager on the allocation: then a page that moves to the device is
// taken away from the host, so that the host's next touch faults, and
// HostFault brings it back.
//
// The protocol of a run of pages moving to the device (toDevice, which
// moves each run of consecutive pages of a window together: moveRun, with
// um.mu held):
//
//	Protect(i, n)  write-protect them in the program: a write from now on
//	               waits in the kernel instead of landing behind the copy
//	copy           host pages → device frames
//	Remove(i, n)   punch the host pages out and lift the write protection,
//	               waking any writer: it faults again, now on a missing
//	               page, and HostFault (which waits for um.mu) brings the
//	               page back first
//	entries        each page's entry maps its frame, last, as without a
//	               pager
//
// Invariant, with um.mu held: a page of an allocation with a pager is
// pageDevice exactly when its host page is a hole (Remove made it one,
// and toHost fills it, through Fill) — for a program that keeps to the
// protocol, and while every pager call returns in its bound. The
// exceptions are all a program's own doing: a failed Remove's pages are
// put back by restoreHost, through Fill or, where the pager cannot reach
// the program, through the daemon's mapping (fillHost falls back to it
// too); a Remove left running past its bound may punch a page the driver
// has since mapped remotely; and a program may punch its own memfd, so
// that a pageHost page is a hole, which its next touch faults on and
// HostFault answers as a duplicate. Each costs that program its own bytes
// or its own progress; no other program's.

// Pager takes pages away from the host side of a managed allocation. Its
// methods are called with um.mu held, so they must not wait for the
// program they act on: the daemon's are ioctls on the program's
// userfaultfd and fallocate on its memfd, which need no help from it but
// do take its kernel locks, so each is bounded, and fails when the
// program holds them too long (server/pager.go, bounded).
type Pager interface {
	// Protect write-protects the n pages from page i in the program's
	// mapping. If it fails, none of them moves: they are mapped remotely
	// instead.
	Protect(i, n int) error
	// Remove punches the n pages from page i out of the host side, after
	// their bytes are in device memory, and lifts the write protection
	// Protect set.
	Remove(i, n int) error
	// Fill puts the len(src)/PageSize pages from page i back, with the
	// bytes of src, each whole: the program never sees a page before its
	// bytes are in (so not by copying through the daemon's own mapping,
	// which makes the page visible, zeroed, before the copy — and a
	// program thread that re-runs its access after a signal reads those
	// zeros). It wakes the threads waiting on the pages. src must be
	// the caller's own bytes, never frames in place: a call that the
	// daemon's bound gave up on runs on and may read src after Fill has
	// returned, when the frames may be another client's.
	Fill(i int, src []byte) error
}

// SetPager installs p as m's pager, or removes it (nil). Every page the
// device has is first brought back to the host, so that the invariant
// above holds from the start (and, on removal, a host without a pager
// reads the latest bytes without faulting).
func (m *Managed) SetPager(p Pager) error {
	d := m.d
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if m.freed {
		return fmt.Errorf("%w: the allocation at %#x was freed", ErrManaged, m.va)
	}
	d.migrateTrace(d.Now(), d.toHost(m, 0, len(m.pages), true), ToHost)
	m.pager = p
	return nil
}

// HostFault serves the host's touch of page i: if the page is on the
// device it comes back (toHost), filling the hole its move punched, with
// the pages after it in the host's window that are on the device too. A
// page already on the host — a duplicate fault, or a fault that raced
// with another's answer — is not written again: the per-page state is
// what makes a duplicate harmless. It reports whether the page came back
// through the pager's Fill, which wakes the threads waiting on it: false
// for a duplicate, and for a page the pager could not fill (fillHost
// copied it in itself), whose waiters the caller must wake.
//
// missing says the fault was on a page absent from the memfd. On a page
// at home that is a hole the program punched itself (a duplicate finds
// its page there): a hole reads zeros, so it is filled with zeros, under
// um.mu like every move, and the Fill wakes the thread. Woken alone, the
// thread faulted again at once, and the fault loop answered it round and
// round, for good (TestAProgramThatPunchesItsOwnPageReadsZeros).
func (m *Managed) HostFault(i int, missing bool) (bool, error) {
	d := m.d
	d.um.mu.Lock()
	defer d.um.mu.Unlock()
	if m.freed {
		return false, fmt.Errorf("%w: the allocation at %#x was freed", ErrManaged, m.va)
	}
	if i < 0 || i >= len(m.pages) {
		return false, fmt.Errorf("%w: page %d is not one of the allocation's %d", ErrManaged, i, len(m.pages))
	}
	if m.pages[i].where != pageDevice {
		d.um.stats.HostDuplicates++
		if missing && m.pager != nil && m.pager.Fill(i, zeroPage[:]) == nil {
			return true, nil // a hole, now zeros; a page that is there refuses the Fill (EEXIST)
		}
		return false, nil
	}
	window := m.hostWindow(i)
	start := d.Now()
	errs := d.um.stats.PagerErrors // fillHost counts a Fill that failed: page i's is the first of toHost's
	moved := d.toHost(m, i, window, false)
	d.migrateTrace(start, moved, ToHost)
	d.um.stats.HostFaults++
	return moved > 0 && m.pager != nil && d.um.stats.PagerErrors == errs, nil
}

// zeroPage is the bytes of a hole, for HostFault's Fill: never written.
var zeroPage [1 << abi.PageShift]byte

// ANCHOR: hostwindow

// hostWindow returns how many pages, from page i, a host fault on page i
// brings back. The host's window is its own, not the device side's: it
// starts at one page and doubles, up to maxAdaptive, while the host's
// faults follow on from its last window, and starts again at one page at
// a fault anywhere else (PrefetchOff: always one). A host fault is a
// round trip through the daemon's process that costs the same whatever
// it moves (Baseline/op=uffdfault/path=process measures it bare), so a
// host reading on should move much per trip; but every page that comes
// with it is a page the kernel allocates in the client and copies into,
// which a host touching one page in many pays for nothing. The device
// side's fixed window of 16 made that sparse touch pay for 16 pages
// (ManagedPager/touch=sparse); doubling from one makes it pay for one,
// and a host reading 256 pages in order pays 9 trips rather than 16. A
// host jumping about in a range it will read whole pays a trip per page;
// the device side's window would have guessed its neighbours. The caller
// holds um.mu.
func (m *Managed) hostWindow(i int) int {
	if m.d.um.policy == PrefetchOff {
		return 1
	}
	window := 1
	if i == m.hostNext && m.hostWin > 0 {
		window = min(2*m.hostWin, maxAdaptive)
	}
	m.hostWin, m.hostNext = window, i+window
	return window
}

// ANCHOR_END: hostwindow

// pagerProtect is Protect, if m has a pager. The caller holds um.mu.
func (m *Managed) pagerProtect(i, n int) error {
	if m.pager == nil {
		return nil
	}
	return m.pager.Protect(i, n)
}

// fillHost copies the frames of the n consecutive pages from first, all
// on the device, back into the host region: through the pager, if m has
// one, in one Fill of the whole run, so that the program sees each page
// only whole and the pager makes one system call, not n. If the pager
// cannot — the program has gone, and with it its address space, or it
// held the call up past the daemon's bound and is being dropped — the
// copy goes through the daemon's mapping: gone, the program sees
// nothing; being dropped for a stall of its own, it may see the page
// before its bytes are in. The caller holds um.mu.
func (m *Managed) fillHost(first, n int, mem []byte) {
	const page = 1 << abi.PageShift
	if m.pager != nil {
		run := make([]byte, n*page) // the frames are not consecutive; the pages are
		for k := range n {
			f := m.pages[first+k].frame
			copy(run[k*page:], mem[f:f+page])
		}
		if m.pager.Fill(first, run) == nil {
			return
		}
		m.d.um.stats.PagerErrors++
	}
	for k := range n {
		f := m.pages[first+k].frame
		copy(m.host.bytes[uint64(first+k)<<abi.PageShift:], mem[f:f+page])
	}
}

// restoreHost puts back, from frames, the bytes of the consecutive pages
// from first after a Remove of them failed. Each page is a hole, if the
// Remove punched it before it failed, or still holds those very bytes,
// write-protected since before the copy. Page by page, a Fill fills a
// hole whole; a Fill that finds the page there (EEXIST) leaves it as it
// is; and if the pager cannot reach the program, the bytes are copied in
// through the daemon's mapping. Not one Fill of the run: one that filled
// some pages and stopped at a page that is there would leave the filled
// ones writable, and a copy of the run after it could land on a write the
// program made in between. (A Remove stuck on the program's own lock may
// punch later still, when the program lets go; that program is being
// dropped for holding it, with its memory.) Each Fill gets a copy of
// its frame, not the frame: the frames go back to the device's free pool
// after this, and a Fill left running past the daemon's bound reads its
// src late (TestARestoreHandsFillNoFrame). The caller holds um.mu.
func (m *Managed) restoreHost(first int, frames []uint64, mem []byte) {
	const page = 1 << abi.PageShift
	for k, f := range frames {
		i := first + k
		err := m.pager.Fill(i, bytes.Clone(mem[f:f+page]))
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			copy(m.host.bytes[uint64(i)<<abi.PageShift:], mem[f:f+page])
		}
	}
}

// pagerRemove is Remove, if m has a pager, and reports whether the pages
// may go on to the device. If Remove failed, the host pages may still be
// there, and so the pages must not live on the device as well: the caller
// maps them remotely, and the failure is counted. The caller holds um.mu.
func (m *Managed) pagerRemove(i, n int) bool {
	if m.pager == nil {
		return true
	}
	if m.pager.Remove(i, n) != nil {
		m.d.um.stats.PagerErrors++
		return false
	}
	return true
}
