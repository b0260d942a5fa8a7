package server_test

import (
	"bufio"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

func init() {
	strangerRoles["waitcopy"] = waitCopyClient
}

// waitCopyClient is a well-behaved pager client that writes its managed
// allocation on the host, says "paged", waits for a line on stdin, and
// then has the device copy the allocation (a punch); it says how the
// Copy went and "done".
func waitCopyClient(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size = 64 << 10
	m, err := g.AllocManaged(size)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("the allocation is not paged")
	}
	for i := range m.Bytes() {
		m.Bytes()[i] = byte(i)
	}
	other, err := g.Alloc(size)
	if err != nil {
		return err
	}
	fmt.Println("paged")
	bufio.NewReader(os.Stdin).ReadString('\n')
	fmt.Println(errnoLine("copy", g.Copy(other, m.Ptr(), size)))
	fmt.Println("done")
	select {}
}

// TestSIGTERMWithAPunchWaitingForAStoppedHelper: the punch helper has
// not begun a request (it has no core — simulated by SIGSTOP, which only
// root can send it) when SIGTERM comes, 5 ms after a well-behaved
// client's device access started the punch. The punch holds um.mu while
// it waits for the helper's start, and the client's teardown in Close
// needs um.mu. The threat model: SIGTERM stops the daemon, exit 0,
// within stopBound, in every state. When the wait for a helper's start
// was bounded by 10 s, as long as cmd/softgpud's shutdown bound, the
// daemon was still running at stopBound and exited 1, "shutdown did not
// finish in its bound"; now Close cuts off the punches in flight first
// (puncher.close), and a helper's start is bounded by 1 s anyway.
func TestSIGTERMWithAPunchWaitingForAStoppedHelper(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if os.Getuid() != 0 {
		t.Skip("stopping the daemon's helper needs root")
	}
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	c := startStranger(t, "waitcopy", d.node, "", nil)
	c.until(t, "paged")
	helpers := helperChildren(pid)
	require.Len(t, helpers, 1, "the daemon's helpers after MANAGED_PAGER")
	require.NoError(t, syscall.Kill(helpers[0], syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(helpers[0], syscall.SIGKILL) })
	fmt.Fprintln(c.stdin, "go")
	time.Sleep(5 * time.Millisecond)
	took := d.stop(t)
	t.Logf("SIGTERM with a punch waiting for a stopped helper: the daemon exited 0 in %v", took)
}
