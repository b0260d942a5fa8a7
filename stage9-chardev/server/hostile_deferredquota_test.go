package server_test

// A quota charge and a deferred free (red-team finding 2). The driver
// keeps freed memory, and a freed DMA window entry, until the commands
// that could name them have run (driver/deferred.go, driver/pinned.go),
// so a FREE, HOST_UNREGISTER or MANAGED_FREE does not give the thing back
// when it returns: the client's own queued work still holds it. The
// quota must hold the charge as long as the driver holds the thing
// (server/owed.go), or a stranger with work queued on its own channels
// allocates and frees in a loop and holds the device: on the code before
// the fix, 12 MiB of memory against a quota of 4, and all 63 window
// entries against a quota of 32. And a client that frees honestly, its
// work done, is never refused for what it freed.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["dq-mem"] = dqMem
	strangerRoles["dq-window"] = dqWindow
	strangerRoles["dq-managed"] = dqManaged
	strangerRoles["dq-alloc"] = dqAlloc
}

// dqQuota is the device memory quota the memory tests give a client
// and its uid: a quarter of the test daemon's 16 MiB.
const dqQuota = 4 << 20

// dqFreeBehind queues DELAYs on both of the client's engines (rtQueueDelays:
// 150 s of them, each under the watchdog), then runs one take-and-give-
// back cycle until the daemon refuses it or max cycles have run; it
// prints "freed N" and the refusal, then "ready", and holds until its
// stdin line.
func dqFreeBehind(node string, max int, cycle func(g *client.GPU) error) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	if err := rtQueueDelays(g, 100); err != nil {
		return err
	}
	n := 0
	for ; n < max; n++ {
		if err := cycle(g); err != nil {
			fmt.Println(errnoLine("refused", err))
			break
		}
	}
	fmt.Printf("freed %d\n", n)
	fmt.Println("ready")
	return waitLine()
}

// dqMem: ALLOC and FREE of 1 MiB behind its queued DELAYs.
func dqMem(node, _ string) error {
	return dqFreeBehind(node, 64, func(g *client.GPU) error {
		p, err := g.Alloc(1 << 20)
		if err != nil {
			return err
		}
		return g.Free(p)
	})
}

// dqWindow: HOST_REGISTER and HOST_UNREGISTER of a page behind its
// queued DELAYs.
func dqWindow(node, _ string) error {
	return dqFreeBehind(node, 200, func(g *client.GPU) error {
		h, err := g.HostAlloc(4096)
		if err != nil {
			return err
		}
		return g.HostFree(h)
	})
}

// dqManaged: MANAGED_ALLOC and MANAGED_FREE of a page behind its queued
// DELAYs; each takes a window entry, as HOST_REGISTER does.
func dqManaged(node, _ string) error {
	return dqFreeBehind(node, 200, func(g *client.GPU) error {
		m, err := g.AllocManaged(4096)
		if err != nil {
			return err
		}
		return m.Free()
	})
}

// dqAlloc: one ALLOC of the size its argument names, reported, and held
// until its stdin line.
func dqAlloc(node, arg string) error {
	var size uint64
	if _, err := fmt.Sscan(arg, &size); err != nil {
		return err
	}
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	for {
		_, err := g.Alloc(size)
		fmt.Println(errnoLine("ALLOC", err))
		if err := waitLine(); err != nil {
			return err
		}
	}
}

// next returns the stranger's next line, failing the test if none comes
// within patience.
func (s *stranger) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			err := s.cmd.Wait() // stderr is written until the stranger has exited
			t.Fatalf("stranger %d ended (%v): %s", s.cmd.Process.Pid, err, s.stderr.String())
		}
		return line
	case <-time.After(patience):
		t.Fatalf("stranger %d said nothing within %v", s.cmd.Process.Pid, patience)
	}
	return ""
}

// freedBefore returns the N of the stranger's "freed N".
func freedBefore(t *testing.T, lines []string) int {
	t.Helper()
	for _, line := range lines {
		var n int
		if _, err := fmt.Sscanf(line, "freed %d", &n); err == nil {
			return n
		}
	}
	t.Fatalf("the stranger said %q, and not how many it freed", lines)
	return 0
}

// TestAStrangerCannotHoldMoreMemoryThanItsQuotaByFreeingBehindItsWork:
// a stranger with DELAYs queued on its own channels ALLOCs and FREEs 1
// MiB until refused. Each FREE is deferred behind those DELAYs, so the
// memory stays the stranger's until they have run, and so must the
// charge: it is refused at its quota of 4 MiB, not when the device is
// empty, and a victim still gets its own quota's worth. (When the
// stranger was refused only by the driver, with some 12 MiB freed behind
// its DELAYs, the victim's first ALLOC failed with ErrNoMemory.)
func TestAStrangerCannotHoldMoreMemoryThanItsQuotaByFreeingBehindItsWork(t *testing.T) {
	d := startDaemon(t, "-client-memory", fmt.Sprint(dqQuota)) // per client: the victim may be of the stranger's uid (strangerCred)
	cred, _ := strangerCred()
	s := startStranger(t, "dq-mem", d.node, "", cred)
	got := s.until(t, "ready")
	t.Logf("stranger: %q", got)
	assert.LessOrEqual(t, freedBefore(t, got), dqQuota>>20, "MiB the stranger freed behind its queued DELAYs before it was refused (%q); want at most its quota's", got)
	assert.Contains(t, got, errnoLine("refused", uapi.ErrQuota), "the stranger's refusal; want its quota's")
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	for i := range 3 { // its own quota's worth, beside its channels' save areas
		_, err := g.Alloc(1 << 20)
		require.NoError(t, err, "the victim's ALLOC %d of 1 MiB, kept, beside a stranger that freed behind its queued DELAYs (%q)", i+1, got)
	}
	d.live(t, "beside the stranger")
	s.kill()
	d.stop(t)
}

// TestAStrangerCannotTakeTheWholeWindowByFreeingBehindItsWork: the
// window quota (by default half the device's entries) bounds what a
// stranger holds. A freed entry retires only once the stranger's own
// channels pass the work queued before the free; when HOST_UNREGISTER
// refunded the entry at once, a stranger with DELAYs queued registered
// and freed until the window was empty, and a victim's HOST_REGISTER
// failed (ErrNoMemory).
func TestAStrangerCannotTakeTheWholeWindowByFreeingBehindItsWork(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "dq-window", d.node, "", cred)
	got := s.until(t, "ready")
	t.Logf("stranger: %q", got)
	assert.LessOrEqual(t, freedBefore(t, got), abi.WindowSlots/2, "window entries the stranger freed behind its queued DELAYs before it was refused (%q); want at most its quota's", got)
	victimRegistersAfter(t, d, s, "a stranger freed behind its queued DELAYs", got)
}

// TestAStrangerCannotTakeTheWholeWindowByFreeingManagedMemoryBehindItsWork:
// MANAGED_ALLOC takes a window entry for the host side too, and
// MANAGED_FREE gives it back through HostFree. Its charge is held until
// the entry retires, as HOST_UNREGISTER's is; but this entry is not the
// same hole, and the test passed before the fix as well: no context maps
// the host side (its pages reach the client's context one by one, and
// MANAGED_FREE unmaps them and invalidates before it frees), so only
// context 0's queued work can hold the entry (namers, driver/bound.go),
// and it retires at the next reclaim whatever the stranger has queued.
// The stranger is never refused; the test holds that it cannot take the
// window this way.
func TestAStrangerCannotTakeTheWholeWindowByFreeingManagedMemoryBehindItsWork(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "dq-managed", d.node, "", cred)
	got := s.until(t, "ready")
	t.Logf("stranger: %q", got)
	victimRegistersAfter(t, d, s, "a stranger freed managed memory behind its queued DELAYs", got)
}

// victimRegistersAfter has a well-behaved client register a page (one
// window entry) once the stranger s has done what, which it
// reported as got; then it stops s and the daemon.
func victimRegistersAfter(t *testing.T, d *daemon, s *stranger, what string, got []string) {
	t.Helper()
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	h, err := g.HostAlloc(4096)
	require.NoError(t, err, "the victim's HOST_REGISTER after %s (%q)", what, got)
	g.HostFree(h)
	s.kill()
	d.stop(t)
}

// TestWhatAGoneClientFreedBehindItsWorkCountsForItsUidUntilGivenBack:
// memory a client freed behind its queued work is its uid's charge too,
// so another client of the same uid cannot have it while the driver
// holds it; and once the first client has gone, its channels closed and
// their queued work dropped, the driver gives it back and the uid is
// refunded — nothing is lost with the client.
func TestWhatAGoneClientFreedBehindItsWorkCountsForItsUidUntilGivenBack(t *testing.T) {
	d := startDaemon(t, "-client-memory", fmt.Sprint(dqQuota), "-uid-memory", fmt.Sprint(dqQuota))
	cred, _ := strangerCred()
	holder := startStranger(t, "dq-mem", d.node, "", cred)
	got := holder.until(t, "ready")
	t.Logf("the first stranger: %q", got)
	other := startStranger(t, "dq-alloc", d.node, fmt.Sprint(2<<20), cred)
	require.Equal(t, errnoLine("ALLOC", uapi.ErrQuota), other.next(t),
		"another client of the same uid, while the first holds what it freed behind its DELAYs (%q): its ALLOC of 2 MiB", got)
	holder.kill()
	deadline := time.Now().Add(patience)
	for {
		_, err := fmt.Fprintln(other.stdin, "again")
		require.NoError(t, err)
		line := other.next(t)
		if line == errnoLine("ALLOC", nil) {
			break
		}
		require.Equal(t, errnoLine("ALLOC", uapi.ErrQuota), line, "the other client's ALLOC of 2 MiB, the first gone")
		require.True(t, time.Now().Before(deadline), "the other client's ALLOC of 2 MiB still refused %v after the first client went", patience)
		time.Sleep(10 * time.Millisecond)
	}
	other.kill()
	d.stop(t)
}

// TestAClientThatFreesItsFinishedWorkIsNeverRefused: the other side of
// the rule. A client at its quota that FREEs what it used — its work
// done, or done by the time it asks again — gets it back whenever it
// asks, however often: the charge waits for the driver to give the
// memory back, and the daemon asks the driver for it before it refuses.
func TestAClientThatFreesItsFinishedWorkIsNeverRefused(t *testing.T) {
	window := 8
	s := serve(t, server.Config{ClientQuota: server.Quota{DeviceMemory: dqQuota, WindowEntries: window}})
	g := dial(t, s)
	for round := range 50 {
		// Device memory: three of the quota's four MiB (the channels'
		// save areas take some of the fourth), each filled, then freed
		// — the first while the other two fills may still be queued.
		var ptrs []client.Ptr
		var fills []*client.Pending
		for i := range 3 {
			p, err := g.Alloc(1 << 20)
			require.NoError(t, err, "round %d: ALLOC %d of 1 MiB", round, i+1)
			f, err := g.FillAsync(p, 1<<20, byte(round))
			require.NoError(t, err, "round %d: FILL %d", round, i+1)
			ptrs, fills = append(ptrs, p), append(fills, f)
		}
		require.NoError(t, fills[0].Wait(), "round %d: fill 1", round)
		require.NoError(t, g.Free(ptrs[0]), "round %d: FREE with later fills maybe queued", round)
		for i, f := range fills[1:] {
			require.NoError(t, f.Wait(), "round %d: fill %d", round, i+2)
		}
		for _, p := range ptrs[1:] {
			require.NoError(t, g.Free(p), "round %d: FREE", round)
		}
		// Window entries: the whole quota, less the one the client
		// library's staging may hold, registered and unregistered.
		var hs []*client.HostBuffer
		for i := range window - 1 {
			h, err := g.HostAlloc(4096)
			require.NoError(t, err, "round %d: HOST_REGISTER %d", round, i+1)
			hs = append(hs, h)
		}
		for _, h := range hs {
			require.NoError(t, g.HostFree(h), "round %d: HOST_UNREGISTER", round)
		}
		// Managed memory, which takes a window entry too.
		m, err := g.AllocManaged(4096)
		require.NoError(t, err, "round %d: MANAGED_ALLOC", round)
		require.NoError(t, m.Free(), "round %d: MANAGED_FREE", round)
	}
}
