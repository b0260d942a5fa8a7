package driver

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// fakePager stands for the daemon's pager (server/pager.go) in-process:
// Remove zeroes the host page, as a punched hole reads, and Fill copies
// the frame back. It records every call.
type fakePager struct {
	host          []byte
	protectErr    error
	protected     []int
	removed       []int
	filled        []int // pages, in the order they were filled
	fills         int   // Fill calls
	removeErr     error
	removePunches bool         // Remove fails after it punched: the daemon's helper died before it answered
	fillExists    map[int]bool // pages Fill finds there, as the kernel's EEXIST
	onFill        func(i int)  // called first at each Fill of page i
	fillErr       error
	protectedLive map[int]bool
	protects      int      // Protect calls
	removes       int      // Remove calls
	srcs          [][]byte // every Fill's src, as passed: the daemon's call may read it after Fill returned
}

func (f *fakePager) Protect(i, n int) error {
	if f.protectErr != nil {
		return f.protectErr
	}
	f.protects++
	for k := i; k < i+n; k++ {
		f.protected = append(f.protected, k)
		f.protectedLive[k] = true
	}
	return nil
}

func (f *fakePager) Remove(i, n int) error {
	if f.removeErr != nil {
		if f.removePunches {
			clear(f.host[i<<abi.PageShift : (i+n)<<abi.PageShift])
		}
		return f.removeErr
	}
	f.removes++
	for k := i; k < i+n; k++ {
		if !f.protectedLive[k] {
			panic("Remove of a page Protect did not protect")
		}
		clear(f.host[k<<abi.PageShift : (k+1)<<abi.PageShift])
		f.removed = append(f.removed, k)
		f.protectedLive[k] = false
	}
	return nil
}

func (f *fakePager) Fill(i int, src []byte) error {
	f.srcs = append(f.srcs, src)
	if f.onFill != nil {
		f.onFill(i)
	}
	if f.fillExists[i] {
		return fmt.Errorf("UFFDIO_COPY of page %d: %w", i, syscall.EEXIST)
	}
	if f.fillErr != nil {
		return f.fillErr
	}
	copy(f.host[i<<abi.PageShift:], src)
	for k := range len(src) >> abi.PageShift {
		f.filled = append(f.filled, i+k)
	}
	f.fills++
	return nil
}

// pagerSetup is a context with a copy channel and a 4-page managed
// allocation whose pager is a fakePager, with prefetch off.
func pagerSetup(t *testing.T) (*Channel, *Managed, *fakePager) {
	t.Helper()
	return pagerSetupWith(t, Config{Prefetch: PrefetchOff, ThrashThreshold: -1}, 4)
}

// pagerSetupWith is pagerSetup with the driver's config and the
// allocation's size in pages chosen.
func pagerSetupWith(t *testing.T, cfg Config, pages int) (*Channel, *Managed, *fakePager) {
	t.Helper()
	d := openWith(t, device.Config{}, cfg)
	ctx, err := d.NewContext()
	require.NoError(t, err)
	ch, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{})
	require.NoError(t, err)
	m, err := ctx.AllocManaged(uint64(pages) << abi.PageShift)
	require.NoError(t, err)
	f := &fakePager{host: m.Bytes(), protectedLive: map[int]bool{}}
	require.NoError(t, m.SetPager(f))
	return ch, m, f
}

// TestHostFaultDuplicateRewritesNothing: a page the device wrote comes
// back on the host's fault, once; a second fault for the same page — the
// kernel queues one when a thread re-runs its access after a signal —
// finds it on the host and writes nothing, so what the host wrote in
// between stays.
func TestHostFaultDuplicateRewritesNothing(t *testing.T) {
	ch, m, f := pagerSetup(t)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 2 << abi.PageShift, Value: 7}))
	if len(f.removed) != 2 || f.host[0] != 0 {
		t.Fatalf("after the device took pages 0 and 1: removed %v, host byte 0 = %d; want [0 1], 0 (a hole)", f.removed, f.host[0])
	}
	moved, err := m.HostFault(0, false)
	if err != nil || !moved {
		t.Fatalf("HostFault(0) = %v, %v; want true, nil", moved, err)
	}
	if f.host[0] != 7 || len(f.filled) != 1 {
		t.Fatalf("after HostFault(0): host byte 0 = %d, filled %v; want 7, [0]", f.host[0], f.filled)
	}
	f.host[0] = 9 // the host writes, after its fault was answered
	moved, err = m.HostFault(0, false)
	if err != nil || moved {
		t.Fatalf("duplicate HostFault(0) = %v, %v; want false, nil", moved, err)
	}
	if f.host[0] != 9 || len(f.filled) != 1 {
		t.Errorf("after a duplicate HostFault(0): host byte 0 = %d, filled %v; want 9 (the host's write), [0]", f.host[0], f.filled)
	}
	if s := m.d.ManagedStats(); s.HostFaults != 1 || s.HostDuplicates != 1 {
		t.Errorf("HostFaults, HostDuplicates = %d, %d; want 1, 1", s.HostFaults, s.HostDuplicates)
	}
	_, err = m.HostFault(4, false)
	assert.ErrorIs(t, err, ErrManaged, "HostFault(4) of a 4-page allocation")
}

// TestHostFaultSaysWhenItsFillWokeTheWaiters: HostFault reports true only
// when the page came back through the pager's Fill — which, in the
// daemon, is a UFFDIO_COPY, and wakes the threads waiting on the page —
// so that the fault loop wakes them itself otherwise. A pager whose Fill
// fails leaves the copy to the driver, and the waiters asleep: HostFault
// must say false, though the page moved.
func TestHostFaultSaysWhenItsFillWokeTheWaiters(t *testing.T) {
	ch, m, f := pagerSetup(t)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 2 << abi.PageShift, Value: 7}))
	woken, err := m.HostFault(0, false)
	require.NoError(t, err)
	assert.True(t, woken, "HostFault(0), filled through the pager")
	f.fillErr = errors.New("the client is gone")
	woken, err = m.HostFault(1, false)
	require.NoError(t, err)
	assert.False(t, woken, "HostFault(1), whose Fill failed")
	assert.Equal(t, byte(7), f.host[1<<abi.PageShift], "page 1's first byte, copied in by the driver when the Fill failed")
	woken, err = m.HostFault(1, false)
	require.NoError(t, err)
	assert.False(t, woken, "a duplicate HostFault(1)")
}

// TestPagerRefusalKeepsThePageOnTheHost: a page whose protection or
// removal fails does not move — it would be on both sides, the host's
// copy stale — but is mapped remotely, and the device's write lands in
// the host page itself.
func TestPagerRefusalKeepsThePageOnTheHost(t *testing.T) {
	for _, tt := range []struct {
		name       string
		protectErr error
		removeErr  error
	}{
		{"protect", errors.New("refused"), nil},
		{"remove", nil, errors.New("refused")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch, m, f := pagerSetup(t)
			f.protectErr, f.removeErr = tt.protectErr, tt.removeErr
			require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 1 << abi.PageShift, Value: 5}))
			if device, remote := m.Resident(); device != 0 || remote != 1 {
				t.Errorf("Resident() = %d, %d; want 0, 1", device, remote)
			}
			assert.Equal(t, byte(5), f.host[0], "host byte 0; want the device's 5, written in place")
		})
	}
}

// TestARemoveThatFailsAfterItsPunchLosesNoBytes: a Remove may fail after
// it took the pages out of the host — the daemon's punch helper can die
// between its fallocate and its answer — and then the run's bytes are
// only in the frames the failed move gives back. They must be put back in
// the host pages before the pages are mapped remotely: with the pager's
// Fill where the pages are holes. Before, the pages were mapped remotely
// as they were, and host and device both read the holes' zeros.
func TestARemoveThatFailsAfterItsPunchLosesNoBytes(t *testing.T) {
	ch, m, f := pagerSetup(t)
	for i := range f.host {
		f.host[i] = byte(i%251 + 1)
	}
	want := append([]byte(nil), f.host...)
	f.removeErr, f.removePunches = errors.New("the helper died after its punch"), true
	other, err := m.ctx.AllocManaged(4 << abi.PageShift) // no pager: Sync brings its pages home
	require.NoError(t, err)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpCopy, Ctx: m.ctx.ID(), Src: m.VA(), Dst: other.VA(), Size: 4 << abi.PageShift}))
	if device, remote := m.Resident(); device != 0 || remote != 4 {
		t.Fatalf("Resident() = %d, %d after every Remove failed; want 0, 4", device, remote)
	}
	assert.Equal(t, want, f.host, "the host's bytes after a Remove that punched them and failed")
	assert.Equal(t, []int{0, 1, 2, 3}, f.filled, "pages put back through the pager's Fill")
	require.NoError(t, other.Sync())
	assert.Equal(t, want, other.Bytes(), "what the device copied from the pages")
}

// TestARestoreHandsFillNoFrame: a Fill the daemon's bound gave up on
// runs on, and reads its src when the program lets go of its lock —
// maybe long after Fill returned, and after the frames the failed move
// gave back went to another allocation, another client's. So no Fill is
// handed a frame's bytes in place: restoreHost handed each page's frame,
// and a late copy could put another client's bytes in a stranger's
// memfd. Here another allocation is filled with 0xee after the restore
// (its frames may be those given back); no src may lie in device memory,
// and every one must still hold the restored bytes.
func TestARestoreHandsFillNoFrame(t *testing.T) {
	ch, m, f := pagerSetup(t)
	for i := range f.host {
		f.host[i] = 7
	}
	f.removeErr, f.removePunches = errors.New("the helper died after its punch"), true
	other, err := m.ctx.AllocManaged(4 << abi.PageShift) // no pager
	require.NoError(t, err)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpCopy, Ctx: m.ctx.ID(), Src: m.VA(), Dst: other.VA(), Size: 4 << abi.PageShift}))
	require.NotEmpty(t, f.srcs, "the restore's Fills")
	reuse, err := m.ctx.AllocManaged(64 << abi.PageShift)
	require.NoError(t, err)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: reuse.VA(), Size: 64 << abi.PageShift, Value: 0xee}))
	mem := m.d.hw.Memory()
	lo, hi := addressOf(mem), addressOf(mem)+uint64(len(mem))
	for k, src := range f.srcs {
		at := addressOf(src)
		assert.False(t, at >= lo && at < hi, "Fill %d's src is device memory, at offset %#x", k, at-lo)
		assert.Equal(t, bytes.Repeat([]byte{7}, len(src)), src, "Fill %d's src after the frames went to another allocation", k)
	}
}

// TestARestoreLeavesAPageThatIsThereAlone: after a failed Remove, a page
// the Remove did not punch is still there, with the program's bytes and
// maybe, once it is no longer protected, a newer write of the program's;
// the Fill that finds it there (EEXIST) must not be followed by a copy
// over it. Here the fake's Fill refuses page 1 as the kernel would a page
// that is there, after the program wrote it.
func TestARestoreLeavesAPageThatIsThereAlone(t *testing.T) {
	ch, m, f := pagerSetup(t)
	for i := range f.host {
		f.host[i] = 3
	}
	f.removeErr = errors.New("the helper did not answer")
	f.fillExists = map[int]bool{1: true}
	f.onFill = func(i int) {
		if i == 1 {
			f.host[1<<abi.PageShift] = 9 // the program's write, after its page was no longer protected
		}
	}
	other, err := m.ctx.AllocManaged(4 << abi.PageShift)
	require.NoError(t, err)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpCopy, Ctx: m.ctx.ID(), Src: m.VA(), Dst: other.VA(), Size: 4 << abi.PageShift}))
	assert.Equal(t, byte(9), f.host[1<<abi.PageShift], "page 1's first byte: the program's write")
	assert.Equal(t, byte(3), f.host[0], "page 0's first byte")
}

// TestAWindowComesHomeInOneFill: the pages of a host fault's window that
// are on the device come back through one Fill of the whole run — for the
// daemon's pager, one UFFDIO_COPY — not one per page: each copy into the
// client is a system call and a page-table update in another process,
// and at one per page a window of 16 cost more than the whole range's Sync
// would per page (the ManagedPager benchmark's sparse row). The host's
// window starts at one page and doubles while its faults follow on from
// the last window: a host reading on through 8 pages faults 4 times
// (pages 0, 1, 3 and 7), each fault one Fill.
func TestAWindowComesHomeInOneFill(t *testing.T) {
	ch, m, f := pagerSetupWith(t, Config{Prefetch: PrefetchWindow, PrefetchPages: 8, ThrashThreshold: -1}, 8)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 8 << abi.PageShift, Value: 5}))
	require.Len(t, f.removed, 8, "pages the device took")
	for _, fault := range []struct {
		page   int
		filled []int // the pages filled so far
	}{
		{0, []int{0}},
		{1, []int{0, 1, 2}},
		{3, []int{0, 1, 2, 3, 4, 5, 6}},
		{7, []int{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		moved, err := m.HostFault(fault.page, false)
		require.NoError(t, err)
		require.True(t, moved, "HostFault(%d) moved nothing", fault.page)
		assert.Equal(t, fault.filled, f.filled, "pages filled after the host's fault on page %d", fault.page)
	}
	assert.Equal(t, 4, f.fills, "Fill calls: one per fault, each window of consecutive pages one run")
	for i, b := range f.host {
		if b != 5 {
			t.Fatalf("host byte %d = %d after the pages came home; want 5, the device's", i, b)
		}
	}
}

// TestADeviceWindowMovesInOneProtectAndOneRemove: the pages of a device
// fault's window that are on the host go to the device with one Protect
// and one Remove of each run of consecutive pages, not one of each per
// page. For the daemon's pager each is a call into the client's memory —
// the Remove one through another process (server/punch.go) — and at one
// per page a 1 MiB FILL of paged memory made 512 of them. A page of the
// window that is on the device already ends a run: here page 3, left on
// the device when the host brought the others home, leaves the runs
// [0, 3) and [4, 8).
func TestADeviceWindowMovesInOneProtectAndOneRemove(t *testing.T) {
	ch, m, f := pagerSetupWith(t, Config{Prefetch: PrefetchWindow, PrefetchPages: 8, ThrashThreshold: -1}, 8)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA() + 3<<abi.PageShift, Size: 1 << abi.PageShift, Value: 4}))
	require.Len(t, f.removed, 8, "pages the first FILL took: its window, all 8")
	// Bring every page but page 3 home.
	for _, i := range []int{0, 1, 2, 4, 5, 6, 7} {
		_, err := m.HostFault(i, false)
		require.NoError(t, err)
	}
	if device, _ := m.Resident(); device != 1 {
		t.Fatalf("%d pages on the device after the host's faults; want 1 (page 3)", device)
	}
	f.protects, f.removes, f.removed = 0, 0, nil
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 8 << abi.PageShift, Value: 5}))
	assert.Equal(t, []int{0, 1, 2, 4, 5, 6, 7}, f.removed, "pages the second FILL took")
	assert.Equal(t, 2, f.protects, "Protect calls: one per run of consecutive pages on the host")
	assert.Equal(t, 2, f.removes, "Remove calls: one per run")
	for i, b := range f.host {
		if b != 0 {
			t.Fatalf("host byte %d = %d after every page went to the device; want 0, a hole", i, b)
		}
	}
}

// TestASparseHostTouchMovesOnePage: a host that touches one page in many
// after the device wrote them all brings back the pages it touches and no
// others — each page that came with a fault for nothing would cost a page
// allocated and copied into the client (the window of 16 this replaced
// took the sparse touch of ManagedPager from one page's answer to
// sixteen's). A fault that does not follow on from the last window starts
// the window again at one page.
func TestASparseHostTouchMovesOnePage(t *testing.T) {
	const pages = 64
	ch, m, f := pagerSetupWith(t, Config{Prefetch: PrefetchWindow, PrefetchPages: 16, ThrashThreshold: -1}, pages)
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: pages << abi.PageShift, Value: 5}))
	for _, i := range []int{0, 16, 32, 48, 1} {
		moved, err := m.HostFault(i, false)
		require.NoError(t, err)
		require.True(t, moved, "HostFault(%d) moved nothing", i)
	}
	assert.Equal(t, []int{0, 16, 32, 48, 1}, f.filled, "pages filled: the touched ones alone")
	if device, _ := m.Resident(); device != pages-5 {
		t.Errorf("%d pages on the device after 5 sparse touches; want %d", device, pages-5)
	}
}

// TestAMissingFaultOnAPageAtHomeFillsItsHole: a missing fault on a page
// the driver has at home is on a hole the program punched itself, or a
// duplicate of one Fill answered. HostFault fills the page with zeros
// through the pager — what a hole reads — and reports it woken; a page
// that is there refuses the Fill (EEXIST), keeps its bytes, and is the
// caller's to wake.
func TestAMissingFaultOnAPageAtHomeFillsItsHole(t *testing.T) {
	_, m, f := pagerSetup(t)
	f.host[0] = 9 // the hole's old bytes, as the fake's Fill overwrites them
	woken, err := m.HostFault(0, true)
	require.NoError(t, err)
	assert.True(t, woken, "a missing fault on a page at home: filled, and woken by the Fill")
	assert.Equal(t, []int{0}, f.filled, "pages filled")
	assert.Equal(t, make([]byte, 1<<abi.PageShift), f.host[:1<<abi.PageShift], "page 0 after its hole was filled: zeros")

	f.host[1<<abi.PageShift] = 5
	f.fillExists = map[int]bool{1: true} // the page is there: a duplicate
	woken, err = m.HostFault(1, true)
	require.NoError(t, err)
	assert.False(t, woken, "a missing fault whose page is there: the caller wakes")
	assert.Equal(t, byte(5), f.host[1<<abi.PageShift], "page 1's byte: kept")
}

// TestAProtectThatFailsIsCounted: PagerErrors counts every pager call that
// failed, one per run — a refused Protect too, whose run is mapped
// remotely (and counted in Remote, page by page). Before, a Protect's
// failure went uncounted, and only a Remove's or a Fill's showed.
func TestAProtectThatFailsIsCounted(t *testing.T) {
	ch, m, f := pagerSetup(t)
	f.protectErr = errors.New("the program's address space is changing")
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: m.ctx.ID(), Dst: m.VA(), Size: 4 << abi.PageShift, Value: 3}))
	s := m.d.ManagedStats()
	assert.Equal(t, uint64(1), s.PagerErrors, "pager calls that failed: the one Protect of the 4-page run")
	assert.Equal(t, uint64(4), s.Remote, "pages mapped remotely")
}
