package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// Clients in processes of their own, as the daemon will meet them: the
// test binary re-executed in a role (TestMain reads SOFTGPU_TEST_ROLE),
// against a daemon in the test's process — or, once, the real softgpud.

// roleEnv names the role a re-executed test binary plays; nodeEnv,
// seedEnv and lapsEnv are its arguments.
const (
	roleEnv = "SOFTGPU_TEST_ROLE"
	nodeEnv = "SOFTGPU_TEST_NODE"
	seedEnv = "SOFTGPU_TEST_SEED"
	lapsEnv = "SOFTGPU_TEST_LAPS"
)

func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
		os.Exit(m.Run())
	case "client":
		os.Exit(report(checkingClient(os.Getenv(nodeEnv), envInt(seedEnv), envInt(lapsEnv))))
	case "victim":
		os.Exit(report(victim(os.Getenv(nodeEnv))))
	case "pager": // pager_test.go
		os.Exit(report(pagerClient(os.Getenv(nodeEnv), envInt(seedEnv), envInt(lapsEnv))))
	case "pagerthrash": // pager_test.go
		os.Exit(report(pagerThrash(os.Getenv(nodeEnv))))
	case "pagervictim": // pager_hostile_test.go
		os.Exit(report(pagerVictim(os.Getenv(nodeEnv))))
	default:
		if play, ok := strangerRoles[role]; ok { // stranger_test.go
			os.Exit(report(play(os.Getenv(nodeEnv), os.Getenv(strangerArgEnv))))
		}
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", roleEnv, role)
		os.Exit(2)
	}
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// report turns a role's outcome into an exit status, saying why on stderr.
func report(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// checkingClient is the "client" role: for laps rounds it writes a
// pattern of its own through the staging buffer, copies it on the device
// into a second buffer and into a host buffer, fills the first, and
// checks every byte of each result.
func checkingClient(node string, seed, laps int) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size = 256<<10 + 123 // not a whole page
	p1, err := g.Alloc(size)
	if err != nil {
		return err
	}
	p2, err := g.Alloc(size)
	if err != nil {
		return err
	}
	host, err := g.HostAlloc(size)
	if err != nil {
		return err
	}
	fmt.Println("started")
	got := make([]byte, size)
	for lap := range laps {
		want := pattern(byte(seed*31+lap), size)
		if err := g.Write(p1, want); err != nil {
			return fmt.Errorf("lap %d: Write: %w", lap, err)
		}
		if err := g.Copy(p2, p1, size); err != nil {
			return fmt.Errorf("lap %d: Copy: %w", lap, err)
		}
		if err := g.Copy(host.Ptr(), p2, size); err != nil {
			return fmt.Errorf("lap %d: Copy to host: %w", lap, err)
		}
		if i := firstDiff(host.Bytes(), want); i >= 0 {
			return fmt.Errorf("lap %d: host byte %d reads %#x; want %#x", lap, i, host.Bytes()[i], want[i])
		}
		if err := g.Read(got, p2); err != nil {
			return fmt.Errorf("lap %d: Read: %w", lap, err)
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("lap %d: byte %d reads %#x; want %#x", lap, i, got[i], want[i])
		}
		if err := g.Fill(p1, size, byte(seed)); err != nil {
			return fmt.Errorf("lap %d: Fill: %w", lap, err)
		}
		if err := g.Read(got, p1); err != nil {
			return fmt.Errorf("lap %d: Read: %w", lap, err)
		}
		if i := firstNot(got, byte(seed)); i >= 0 {
			return fmt.Errorf("lap %d: byte %d reads %#x after Fill; want %#x", lap, i, got[i], byte(seed))
		}
	}
	fmt.Println("ok")
	return nil
}

// victim is the "victim" role: it registers host memory and queues
// seconds of work on both engines — copies from its host memory and
// DELAYs — says "ready", and waits to be killed with all of it in flight.
func victim(node string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	const size = 1 << 20
	host, err := g.HostAlloc(size)
	if err != nil {
		return err
	}
	for i := range host.Bytes() {
		host.Bytes()[i] = byte(i)
	}
	p, err := g.Alloc(size)
	if err != nil {
		return err
	}
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := g.NewBatch(e)
		for range 100 {
			if e == client.Copy {
				b.Copy(p, host.Ptr(), size)
			}
			b.Delay(uint64(20 * time.Millisecond))
		}
		if _, err := b.Submit(); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	select {} // until SIGKILL
}

// child is a re-executed test binary in a role.
type child struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout, line by line; closed at EOF
	stderr bytes.Buffer
}

// startChild starts the test binary as role against node.
func startChild(t testing.TB, role, node string, seed, laps int) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 16)}
	c.cmd.Env = append(os.Environ(), roleEnv+"="+role, nodeEnv+"="+node,
		seedEnv+"="+strconv.Itoa(seed), lapsEnv+"="+strconv.Itoa(laps))
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start(), "starting a %s process", role)
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill() // a no-op error for one that has exited
		c.cmd.Wait()
	})
	return c
}

// expect waits for the child to print line.
func (c *child) expect(t testing.TB, line string) {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case got, ok := <-c.lines:
			if !ok {
				t.Fatalf("process %d ended without printing %q: %s", c.cmd.Process.Pid, line, c.stderr.String())
			}
			if got == line {
				return
			}
		case <-timeout:
			t.Fatalf("process %d did not print %q within %v", c.cmd.Process.Pid, line, patience)
		}
	}
}

// succeed waits for the child to print "ok" and exit 0.
func (c *child) succeed(t testing.TB) {
	t.Helper()
	c.expect(t, "ok")
	require.NoError(t, c.cmd.Wait(), "process %d: %s", c.cmd.Process.Pid, c.stderr.String())
}

func TestClientProcessesEachCheckTheirOwnBytes(t *testing.T) {
	s := serve(t, server.Config{Device: deviceConfig(32 << 20)})
	var clients []*child
	for seed := range 3 {
		clients = append(clients, startChild(t, "client", s.Node(), seed+1, 12))
	}
	for _, c := range clients {
		c.succeed(t)
	}
}

// TestAClientKilledMidStream: a client is killed with SIGKILL while it
// has host memory registered and seconds of commands queued on both
// engines; the clients beside it finish with every byte right, and the
// daemon tears the dead one down: it is no longer listed, its memory is
// given back, and the channels it held serve a new client.
func TestAClientKilledMidStream(t *testing.T) {
	s := serve(t, server.Config{Device: deviceConfig(32 << 20)})
	ctl := control(t, s.Node())
	baseline := info(t, ctl).MemoryUsed
	v := startChild(t, "victim", s.Node(), 0, 0)
	v.expect(t, "ready")
	var others []*child
	for seed := range 2 {
		c := startChild(t, "client", s.Node(), seed+7, 30)
		c.expect(t, "started")
		others = append(others, c)
	}
	cs, err := ctl.Clients()
	require.NoError(t, err)
	victimListed := false
	for _, ci := range cs {
		if ci.Pid == uint32(v.cmd.Process.Pid) {
			victimListed = true
			if ci.HostMemory == 0 || ci.Channels != abi.NumEngines {
				t.Fatalf("the victim has %d bytes of host memory and %d channels; want some and %d", ci.HostMemory, ci.Channels, abi.NumEngines)
			}
		}
	}
	if !victimListed {
		t.Fatalf("the victim (pid %d) is not among the daemon's clients", v.cmd.Process.Pid)
	}
	require.NoError(t, v.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, v.cmd.Wait(), "the victim exited cleanly; it was to be killed")
	for _, c := range others {
		c.succeed(t)
	}
	waitClients(t, ctl, 1)
	waitFor(t, "the dead client's memory given back", func() (bool, string) {
		used := info(t, ctl).MemoryUsed
		return used == baseline, fmt.Sprintf("%d bytes in use; %d before", used, baseline)
	})
	// Every charge the victim held is refunded, the tables of its
	// context with the rest: the one client left, the control
	// connection, holds nothing, nor does its uid — the victim's.
	// A channel's charge outlives its client until the kernel has
	// deleted the channel's two memfds and inotify has said so
	// (server/linger.go), which comes after the processes are reaped
	// and after the daemon's teardown: the refund is waited for, and
	// it must come.
	waitFor(t, "every charge of the uid refunded", func() (bool, string) {
		qs, err := ctl.Quotas()
		require.NoError(t, err)
		require.Len(t, qs, 1, "CLIENT_QUOTA after the victim's teardown: %+v", qs)
		return qs[0].UidUse == uapi.Pools{}, fmt.Sprintf("the uid's use of every pool: %+v", qs[0].UidUse)
	})
	// The victim held channels 2 and 3, the lowest a client gets (the
	// driver gives the lowest free id): a new client gets them back, clean.
	r := dialRaw(t, s.Node())
	r.attach()
	for e := range abi.Engine(abi.NumEngines) {
		ch := r.openChannel(e)
		assert.Equal(t, abi.Channel(abi.NumEngines)+abi.Channel(e), ch.id, "a new client's %v channel is %v, which the killed client held", e, ch.id)
		assert.Equal(t, abi.FaultNone, ch.fault(), "%v comes to a new client faulted", ch.id)
		i := ch.put(abi.Command{Op: abi.OpNop, Ctx: r.ctx})
		ch.ring(ch.next)
		assert.Equal(t, abi.StatusOK, ch.wait(i), "NOP on %v, the killed client's channel once", ch.id)
	}
}

// TestTheRealDaemon builds softgpud and runs it as a child process: a
// client works against it; SIGTERM makes it close every connection, exit
// 0 and remove its node; and the client's next call fails with ErrGone.
func TestTheRealDaemon(t *testing.T) {
	d := startDaemon(t) // the hostile tests' harness (stranger_test.go)
	node := d.node
	g, err := client.Dial(node)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	const size = 1 << 20
	p, err := g.Alloc(size)
	require.NoError(t, err)
	want := pattern(0x42, size)
	require.NoError(t, g.Write(p, want))
	got := make([]byte, size)
	require.NoError(t, g.Read(got, p))
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("byte %d reads %#x; want %#x", i, got[i], want[i])
	}

	d.stop(t)
	_, err = os.Stat(node)
	assert.ErrorIs(t, err, os.ErrNotExist, "the node after softgpud exited; want it removed")
	_, err = g.Alloc(size)
	assert.ErrorIs(t, err, client.ErrGone, "Alloc after softgpud exited")
	assert.ErrorIs(t, g.Fill(p, size, 1), client.ErrGone, "Fill after softgpud exited")
	if !strings.Contains(d.log(), "device closed") {
		t.Errorf("softgpud's log does not say the device closed:\n%s", d.log())
	}
}
