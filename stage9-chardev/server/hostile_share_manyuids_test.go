package server_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/uffd"
)

// The share is per uid. A uid whose calls take less than a
// shareLeak-th of the time never fills it, so each uid may cost the
// others a share of the fault loop's time for good, unjudged. A
// stranger with several uids — root, or any user with a range in
// /etc/subuid, whose newuidmap gives its user namespace's processes uids
// the daemon's SO_PEERCRED sees as distinct — has a share per uid, and
// the shares add up.

func init() {
	strangerRoles["dutystall"] = dutyStallStranger
}

// dutyStallStranger (arg: "target period") is loopStallStranger held
// under the drain: it mprotects a span of populated mappings that takes
// about target, then lets go for the rest of period (target/period under
// 1/shareLeak), again and again; after "ready" and 3 s with no fault
// waiting (the test's baseline), 16 threads of its own write-protect a
// page each of its paged managed allocations and write it, so that the
// fault loop always has one of its wakes to make, and one in each period
// waits for the lock.
func dutyStallStranger(node, arg string) error {
	var targetArg, periodArg string
	fmt.Sscan(arg, &targetArg, &periodArg)
	target, err := time.ParseDuration(targetArg)
	if err != nil {
		return err
	}
	period, err := time.ParseDuration(periodArg)
	if err != nil {
		return err
	}
	runtime.GOMAXPROCS(32)
	lock, err := newMmapLock(20000)
	if err != nil {
		return err
	}
	_, n := lock.shorten(target)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	const pages, allocs = 4, 4
	disarmSockets()
	var hosts [][]byte
	for range allocs {
		m, err := g.AllocManaged(pages * 4096)
		if err != nil {
			return err
		}
		if !m.Paged() {
			return fmt.Errorf("not paged")
		}
		disarmSockets()
		host := m.Bytes()
		for i := range host {
			host[i] = 1
		}
		hosts = append(hosts, host)
	}
	var held, lapses atomic.Int64
	go func() {
		runtime.LockOSThread()
		for {
			took := lock.hold()
			held.Add(int64(took))
			lapses.Add(1)
			time.Sleep(max(period-took, 11*took)) // never more than a twelfth of the time
		}
	}()
	fmt.Printf("mprotect of %d maps: about %v, every %v\n", n, target, period)
	fmt.Println("ready")
	time.Sleep(3 * time.Second)
	var writes atomic.Int64
	for k := range pages * allocs {
		host := hosts[k/pages]
		k %= pages
		go func() {
			runtime.LockOSThread()
			at := uffd.Address(host) + uint64(k)*4096
			fd := ourUffdFor(host)
			for {
				uffd.WriteProtect(fd, at, 4096, true)
				host[k*4096]++ // a write-protect fault: the fault loop's wake waits for the lock
				writes.Add(1)
			}
		}()
	}
	for {
		time.Sleep(time.Second)
		fmt.Fprintf(os.Stderr, "writes %d, lock held %v a lapse\n", writes.Load(), time.Duration(held.Load()/max(lapses.Load(), 1)))
	}
}

// TestAUidUnderTheDrainCostsOthersItsShare: RT_UIDS (default 1)
// strangers, each of its own uid (65534, 65533, ...), each holding its
// mmap lock about 12 ms in every 150 ms (8 %) with its wakes queued at
// the fault loop. A well-behaved client's laps (64 KiB to the device,
// read back on the host) are timed for 2.5 s before the strangers'
// faults start (their locks held, no fault waiting: the baseline), then
// for 8 s with them. No read may wait five bounds, and one stranger,
// asleep 8 % of the time, over its share, must be judged (barred). Until
// it is — its share fills only at the rate it exceeds the drain, a few
// seconds here — it costs the well-behaved client's reads about a second
// more over the 8 s (1.1 to 1.3 s, logged).
//
// With a share of a tenth (shareLeak 10) that stranger was under its
// drain, never judged, and cost 1.75 to 1.86 s extra; with a twentieth it
// is judged. The share is per uid, as every quota here is, so each uid
// more costs the others a share more: with RT_UIDS=4 and a share of a
// tenth, a red team measured 3.6 s extra over the 8 s, no stranger judged. A user
// with a range of subordinate uids can be many uids; the daemon's unit
// stays the uid (see the stage 9 chapter).
func TestAUidUnderTheDrainCostsOthersItsShare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if cred, _ := strangerCred(); cred == nil {
		t.Skip("the strangers must be of other uids, and only root can make it so")
	}
	uids, duty := rtInt("RT_UIDS", 1), rtString("RT_DUTY", "12ms 150ms")
	d := startDaemon(t)
	var ss []*stranger
	for k := range uids {
		u := uint32(strangerUID - k)
		ss = append(ss, startStranger(t, "dutystall", d.node, duty, &syscall.Credential{Uid: u, Gid: u}))
	}
	for _, s := range ss {
		t.Logf("stranger: %q", s.until(t, "ready"))
	}
	ready := time.Now()
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	type phase struct {
		laps               int
		reading, worstRead time.Duration
	}
	run := func(from, to time.Duration, lap0 int) phase {
		var p phase
		for time.Now().Before(ready.Add(from)) {
			time.Sleep(10 * time.Millisecond)
		}
		for ; time.Now().Before(ready.Add(to)); p.laps++ {
			v := byte(lap0 + p.laps + 1)
			m, err := g.AllocManaged(64 << 10)
			require.NoError(t, err)
			require.True(t, m.Paged())
			host := m.Bytes()
			host[0] = 1
			require.NoError(t, g.Fill(m.Ptr(), 64<<10, v))
			read := time.Now()
			for i := 0; i < len(host); i += 4096 {
				require.Equal(t, v, host[i], "host byte %d", i)
			}
			r := time.Since(read)
			p.reading += r
			p.worstRead = max(p.worstRead, r)
			require.NoError(t, m.Free())
		}
		return p
	}
	base := run(200*time.Millisecond, 2700*time.Millisecond, 0)
	attack := run(3500*time.Millisecond, 11500*time.Millisecond, 100)
	require.NoError(t, g.Close())
	// The share fills at the rate the stranger's sleep exceeds the drain,
	// which the machine's load moves: on a quiet machine it was judged 3.5
	// to 4.7 s after its faults began (three runs); beside a helper's
	// tests, not within the 8 s of timed reads. It is given longer to be
	// judged, still at work: a share that never judges it still fails.
	const judgedWithin = 20 * time.Second
	for uids == 1 && !strings.Contains(d.log(), "barred from the pager until") && time.Since(ready) < 3*time.Second+judgedWithin {
		time.Sleep(50 * time.Millisecond)
	}
	if at := droppedTime(d.log()); !at.IsZero() {
		t.Logf("a stranger judged %v after its faults began", at.Sub(ready.Add(3*time.Second)).Round(time.Millisecond))
	}
	for _, s := range ss {
		t.Logf("stranger:\n%s", tail(s.kill(), 2))
	}
	mean := func(p phase) time.Duration { return p.reading / time.Duration(max(p.laps, 1)) }
	t.Logf("baseline: %d laps, host reads %v in all (%v a lap), worst read %v", base.laps, base.reading, mean(base), base.worstRead)
	t.Logf("attack:   %d laps, host reads %v in all (%v a lap), worst read %v", attack.laps, attack.reading, mean(attack), attack.worstRead)
	extra := attack.reading - time.Duration(attack.laps)*mean(base)
	t.Logf("%d uids at %q: extra host-read time under attack: %v", uids, duty, extra)
	t.Logf("the daemon dropped %d clients: %q", strings.Count(d.log(), "client dropped"), dropped(d.log()))
	t.Logf("SIGTERM: the daemon exited in %v", d.stop(t))
	if attack.worstRead > 5*100*time.Millisecond {
		t.Errorf("a host read waited %v behind the strangers", attack.worstRead)
	}
	if uids == 1 && !strings.Contains(d.log(), "barred from the pager until") {
		t.Errorf("a stranger asleep in its calls 8 %% of the time, over its share, was not judged within %v of its faults' start: the well-behaved client's host reads took %v more than the baseline's pace over %d laps (%v a lap against %v)",
			judgedWithin, extra, attack.laps, mean(attack), mean(base))
	}
}
