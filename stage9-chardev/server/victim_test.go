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

// The well-behaved victim of the tests that load the machine: a client
// that works its paged memory in a process of its own, while a stranger
// of another uid loads the CPUs, the memory bus, the disk or the device
// (hostile_share_*_test.go, TestCPULoadBarsNoBusyClient). None of those
// strangers holds a lock of the victim's, so the pager must never judge
// the victim: not drop it, not bar its uid.
//
// The RT_ environment variables are a red team's knobs: a hostile test
// that reads one re-runs its attack at another size, and its comment
// names the variable and its default (often 0 is the control: the
// attack off). The defaults are what the tests assert on.

// rtInt returns the RT_ variable name as a whole number, or def if it
// is unset or not a number.
func rtInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// rtString returns the RT_ variable name, or def if it is unset.
func rtString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

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

// underLoad runs the victim (busyVictim with victimArg) against a new
// daemon while a uid-65534 stranger runs role with hogArg — against the
// daemon's node if atNode, else never opening it — and asserts that the
// victim was not judged. what names the load in the log.
func underLoad(t *testing.T, victimArg, role string, atNode bool, hogArg, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	d := startDaemon(t)
	node := ""
	if atNode {
		node = d.node
	}
	lines, ended := runVictim(t, d, victimArg, func() {
		startStranger(t, role, node, hogArg, cred).until(t, "ready")
	})
	t.Logf("%s of uid %d; victim %q", what, cred.Uid, victimArg)
	judgedVictim(t, d, lines, ended)
	d.stop(t)
}
