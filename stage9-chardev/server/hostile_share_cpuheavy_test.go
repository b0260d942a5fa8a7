package server_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"softgpu/stage9-chardev/client"
)

// The share (pagerShare) judges a uid whose calls into its memory wait
// more than a shareLeak-th of the time. Its first version charged
// each call its wall time, assuming "a well-behaved client's calls take
// microseconds" — but a client that works its managed memory without
// pause makes the pager's calls its main work: the UFFDIO_COPY of every
// page the host reads, the punch of every page the device takes. That
// time is the client's own work, not a lock it holds, and a red team's
// busy client, alone on the machine, was dropped within a second. The
// share now charges only what a call waited asleep (offCPU).

func init() {
	strangerRoles["busyvictim"] = busyVictim
}

// busyVictim (arg: "MiB seconds pause") is a well-behaved client in a
// process of its own: it makes one paged managed allocation of MiB and,
// for seconds, goes round it — the device fills all of it, the host
// reads every page back — sleeping pause between laps. It prints "ready"
// once it has its allocation, then "laps N worst W" and "done"; or "error
// lap N: ..." at its first failure. It never disarms its liveness socket:
// a daemon that closes its end kills it (SIGKILL), as it would any
// client.
func busyVictim(node, arg string) error {
	var mib, seconds int
	var pauseArg string
	if _, err := fmt.Sscan(arg, &mib, &seconds, &pauseArg); err != nil {
		return err
	}
	pause, err := time.ParseDuration(pauseArg)
	if err != nil {
		return err
	}
	size := uint64(mib) << 20
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(size)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("not paged")
	}
	host := m.Bytes()
	fmt.Println("ready")
	laps := 0
	var worst time.Duration
	for end := time.Now().Add(time.Duration(seconds) * time.Second); time.Now().Before(end); laps++ {
		t0 := time.Now()
		v := byte(laps + 1)
		if err := g.Fill(m.Ptr(), size, v); err != nil {
			fmt.Printf("error lap %d: Fill: %v\n", laps, err)
			break
		}
		bad := false
		for i := 0; i < len(host); i += 4096 {
			if host[i] != v {
				fmt.Printf("error lap %d: the host's byte %d reads %#x, want %#x\n", laps, i, host[i], v)
				bad = true
				break
			}
		}
		if bad {
			break
		}
		worst = max(worst, time.Since(t0))
		time.Sleep(pause)
	}
	fmt.Printf("laps %d worst %v\n", laps, worst.Round(time.Millisecond))
	return nil
}

// runVictim runs busyVictim with arg as uid 1000 against d, starting hog
// (if not nil) once the victim is ready, and returns the victim's lines
// and how it ended.
func runVictim(t *testing.T, d *daemon, arg string, hog func()) (lines []string, ended error) {
	t.Helper()
	v := startStranger(t, "busyvictim", d.node, arg, &syscall.Credential{Uid: 1000, Gid: 1000})
	v.until(t, "ready")
	if hog != nil {
		hog()
	}
	timeout := time.After(patience)
	for {
		select {
		case line, ok := <-v.lines:
			if !ok {
				return lines, v.cmd.Wait()
			}
			lines = append(lines, line)
		case <-timeout:
			t.Fatalf("the victim said %q, and did not end within %v", lines, patience)
		}
	}
}

// judgedVictim asserts that the well-behaved victim ended well, was not
// dropped, and that no uid was barred.
func judgedVictim(t *testing.T, d *daemon, lines []string, ended error) {
	t.Helper()
	t.Logf("victim (uid 1000): %q, ended: %v", lines, ended)
	t.Logf("dropped: %q", dropped(d.log()))
	assert.NoError(t, ended, "the well-behaved victim's process (a daemon that drops a paged client kills it)")
	assert.False(t, strings.Contains(strings.Join(lines, "\n"), "error"), "the well-behaved victim's laps: %q", lines)
	assert.Empty(t, dropped(d.log()), "the daemon dropped a well-behaved client")
	assert.NotContains(t, d.log(), "barred from the pager until", "the daemon barred a well-behaved client's uid from the pager")
}

// TestABusyClientAloneKeepsItsShare: no stranger at all. A
// well-behaved client (uid 1000) goes round a paged allocation of
// RT_VICTIM_MIB (default 8) MiB for 6 s with no pause: the device fills
// it, the host reads it back. It holds none of its locks; the pager's
// calls are its work. It must not be dropped, nor its uid barred.
func TestABusyClientAloneKeepsItsShare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if cred, _ := strangerCred(); cred == nil {
		t.Skip("the victim runs as uid 1000: only root can make it so")
	}
	mib := 8
	if v, err := strconv.Atoi(os.Getenv("RT_VICTIM_MIB")); err == nil {
		mib = v
	}
	d := startDaemon(t)
	lines, ended := runVictim(t, d, fmt.Sprintf("%d 6 0s", mib), nil)
	judgedVictim(t, d, lines, ended)
	d.stop(t)
}

// TestCPULoadBarsNoBusyClient: a lighter well-behaved client —
// 1 MiB a lap, 20 ms between laps, which alone is never judged — while a
// uid-65534 process spins RT_HOG_THREADS (default 400) threads. The
// daemon's threads, and its punch helper, kept from their CPU mid-call by
// another uid's spinners, are charged to the victim's share. It must not
// be dropped, nor its uid barred. RT_HOG_THREADS=0 is the control.
func TestCPULoadBarsNoBusyClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	threads := 400
	if v, err := strconv.Atoi(os.Getenv("RT_HOG_THREADS")); err == nil {
		threads = v
	}
	arg := "1 6 20ms"
	if v := os.Getenv("RT_VICTIM_ARG"); v != "" {
		arg = v
	}
	d := startDaemon(t)
	lines, ended := runVictim(t, d, arg, func() {
		s := startStranger(t, "cpuhog", "", fmt.Sprintf("%d 10", threads), cred)
		s.until(t, "ready")
	})
	t.Logf("a %d-thread CPU hog of uid %d; victim %q", threads, cred.Uid, arg)
	judgedVictim(t, d, lines, ended)
	d.stop(t)
}
