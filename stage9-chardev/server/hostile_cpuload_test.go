package server_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

// The pager's bound counts a call's time from when it began
// (server/pager.go, bounded): another uid's load on the CPUs is not a
// client holding its locks.

func init() {
	strangerRoles["cpuhog"] = cpuHog
}

// cpuHog (arg: "threads seconds") keeps threads threads spinning for
// seconds, says "ready" at the start, and exits. It never opens the node:
// it is any local process, of any uid.
func cpuHog(_, arg string) error {
	var threads, seconds int
	fmt.Sscan(arg, &threads, &seconds)
	runtime.GOMAXPROCS(threads)
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	for range threads {
		go func() {
			runtime.LockOSThread()
			for x := 0; time.Now().Before(end); x++ {
			}
		}()
	}
	fmt.Println("ready")
	time.Sleep(time.Until(end))
	fmt.Println("done")
	return nil
}

// TestAStrangersCPULoadBarsNoOtherUid: a process of another uid that only
// burns CPU — hundreds of spinning threads on a 2-core machine — must not
// make the daemon drop a well-behaved client, nor bar its uid from the
// pager. bounded counts a call's time from when it began, and a thread
// the kernel keeps off its core mid-call (or a waiter that finds both its
// timer and the answer ready, and picks the timer) reads as the client
// holding its kernel locks.
func TestAStrangersCPULoadBarsNoOtherUid(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	threads := rtInt("RT_HOG_THREADS", 400)
	d := startDaemon(t)
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	m, err := g.AllocManaged(64 << 10)
	require.NoError(t, err)
	require.True(t, m.Paged(), "the well-behaved client's allocation is paged")
	host := m.Bytes()

	s := startStranger(t, "cpuhog", "", fmt.Sprintf("%d 6", threads), cred)
	s.until(t, "ready")
	laps, failed := 0, ""
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end) && failed == ""; laps++ {
		if err := g.Fill(m.Ptr(), 64<<10, byte(laps+1)); err != nil {
			failed = fmt.Sprintf("lap %d: Fill: %v", laps, err)
			break
		}
		for i := 0; i < len(host); i += 4096 {
			if host[i] != byte(laps+1) {
				failed = fmt.Sprintf("lap %d: the host's byte %d reads %#x", laps, i, host[i])
				break
			}
		}
		time.Sleep(time.Millisecond) // past thrashLapse: the pages move every lap
	}
	s.kill()
	t.Logf("%d laps under a %d-thread CPU hog of uid %d", laps, threads, cred.Uid)
	assert.Empty(t, failed, "the well-behaved client (uid %d) under another uid's CPU load", os.Getuid())
	assert.Empty(t, dropped(d.log()), "the daemon dropped a client, while the only stranger never opened the node")
	assert.NotContains(t, d.log(), "barred from the pager until", "the daemon barred a uid from the pager")
	require.NoError(t, g.Close())
	d.stop(t)
}
