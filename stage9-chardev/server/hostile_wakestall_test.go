package server_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

// The wake after a punch: a call into the client's memory like any
// other, bounded from its own start.
//
// Remove was the punch (by the helper) and then wakeOn,
// UFFDIO_WRITEPROTECT (off) on the client's userfaultfd, which takes the
// client's mmap lock, in one call that bounded judged by the helper's
// clock (pagerCall.span): once the fallocate had ended within pagerBound,
// bounded waited for the call however long it took, wakeOn included. A
// stranger that took its own mmap lock for writing the moment its pages
// were protected (a spinning thread sees it in /proc/self/pagemap, then
// one long mprotect) made that ioctl wait with um.mu held — every
// client's managed memory — and was never judged stuck, dropped or
// barred: the fallocate was quick. Found by a red team; the wake is now
// a bounded call of its own (pager.go, Remove).

func init() {
	strangerRoles["wakestall"] = wakeStallStranger
}

// wakeStallStranger (arg: maps) maps maps chunks (newMmapLock), says how long
// one mprotect of them takes and "ready"; then, lap after lap until it is
// killed, it makes a paged managed allocation of 64 KiB, writes it on the
// host, and has the device fill it (its pages move: Protect, copy,
// Remove) while a thread of its own spins on /proc/self/pagemap of the
// first page and, the moment the page is write-protected, mprotects the
// span once. Each
// lap writes a line to stderr: the Fill's time, the mprotect's, and
// whether the mprotect came after the punch.
func wakeStallStranger(node, arg string) error {
	var maps int
	fmt.Sscan(arg, &maps)
	lock, err := newMmapLock(maps)
	if err != nil {
		return err
	}
	fmt.Printf("mprotect %v\n", lock.hold().Round(time.Millisecond))
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	const size = 64 << 10
	for lap := 0; ; lap++ {
		m, err := g.AllocManaged(size)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lap %d: AllocManaged: %v\n", lap, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !m.Paged() {
			fmt.Fprintf(os.Stderr, "lap %d: not paged\n", lap)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		disarmSockets() // dropped, it lives on to say so
		host := m.Bytes()
		for i := range host {
			host[i] = byte(lap)
		}
		type spun struct {
			hit  bool
			took time.Duration
		}
		res := make(chan spun, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			pm, err := os.Open("/proc/self/pagemap")
			if err != nil {
				res <- spun{}
				return
			}
			defer pm.Close()
			var ent [8]byte
			at := int64(addressOf(host)/4096) * 8
			end := time.Now().Add(2 * time.Second)
			for time.Now().Before(end) {
				// Bit 57: the page is write-protected by a userfaultfd —
				// the daemon's Protect; the punch and the wake follow.
				if n, _ := pm.ReadAt(ent[:], at); n == 8 && ent[7]&(1<<1) != 0 {
					res <- spun{true, lock.hold()}
					return
				}
			}
			res <- spun{}
		}()
		start := time.Now()
		ferr := g.Fill(m.Ptr(), size, byte(lap+1))
		took := time.Since(start)
		s := <-res
		fmt.Fprintf(os.Stderr, "lap %d: fill %v (%v), mprotect after protect %v took %v\n", lap, took.Round(time.Millisecond), ferr, s.hit, s.took.Round(time.Millisecond))
		if ferr != nil {
			fmt.Println("dropped")
			select {}
		}
		m.Free()
	}
}

// TestAStrangerStallsOthersInTheWakeAfterItsPunch: while a
// stranger (another uid) stalls the wake after each of its punches, a
// well-behaved client's managed laps (64 KiB to the device and its host
// bytes checked) must not wait on the stranger for more than one
// incident: bounded's promise is that a uid costs the others about one
// pagerBound per bar. Then the stranger must have been dropped, or the
// well-behaved client must never have waited far past pagerBound. With
// the wake inside the punch's call, 2 to 14 laps of the well-behaved
// client took over two bounds, up to 611 ms, and the stranger was never
// dropped; now the stranger is dropped at its first stall ("UFFDIO_WRITEPROTECT
// (off) of pages [0, +16) outlived 100ms"), and the worst lap is one
// bound.
func TestAStrangerStallsOthersInTheWakeAfterItsPunch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	s := startStranger(t, "wakestall", d.node, "30000", &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
	t.Logf("stranger: %q", s.until(t, "ready"))
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	const slow = 2 * 100 * time.Millisecond // two pagerBounds
	var worst time.Duration
	laps, stalls, stalled := 0, 0, time.Duration(0)
	var slowAt []time.Time // when each lap over slow began
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); laps++ {
		// A new allocation each lap, as mmLockStranger's: its pages have
		// never moved, so the thrashing guard leaves them to the pager.
		start := time.Now()
		m, err := g.AllocManaged(64 << 10)
		require.NoError(t, err)
		require.True(t, m.Paged())
		host := m.Bytes()
		host[0] = 1
		require.NoError(t, g.Fill(m.Ptr(), 64<<10, byte(laps+1)), "lap %d", laps)
		for i := 0; i < len(host); i += 4096 {
			require.Equal(t, byte(laps+1), host[i], "lap %d: host byte %d", laps, i)
		}
		require.NoError(t, m.Free())
		took := time.Since(start)
		worst = max(worst, took)
		if took > slow {
			slowAt = append(slowAt, start)
			stalled += took
		}
	}
	require.NoError(t, g.Close())
	log := s.kill()
	hits := strings.Count(log, "after protect true")
	t.Logf("stranger's laps (%d of its mprotects came right after its punch):\n%s", hits, tail(log, 6))
	t.Logf("well-behaved: %d laps, %d over %v (%v in all), worst %v", laps, len(slowAt), slow, stalled, worst)
	t.Logf("the daemon dropped:\n%s", dropped(d.log()))
	t.Logf("SIGTERM: the daemon exited in %v", d.stop(t))
	// A lap begun once the stranger was dropped (and a bound after, for
	// one queued behind its call) waits on no call into its memory: if it
	// is slow, the machine is, as laps over two bounds were at a load of
	// 28, beside a helper's tests. Not dropped, every lap counts.
	cut := droppedTime(d.log())
	for _, at := range slowAt {
		if cut.IsZero() || at.Before(cut.Add(100*time.Millisecond)) {
			stalls++
		}
	}
	t.Logf("laps over %v begun before the stranger was dropped (%v): %d of %d", slow, cut, stalls, len(slowAt))
	if stalls > 1 || worst > slow && dropped(d.log()) == "" {
		t.Errorf("a stranger held um.mu in the wake after its punches: %d of the well-behaved client's %d laps took over %v (%v in all, worst %v); the stranger dropped: %v", stalls, laps, slow, stalled, worst, dropped(d.log()) != "")
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
