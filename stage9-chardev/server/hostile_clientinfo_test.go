package server_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

// The attack: a stranger reads another user's client's counters through
// the control calls. "No client sees another's counters" (DESIGN.md's
// threat model) moved the engines' counters off the public pages, but
// CLIENT_INFO and CLIENT_QUOTA answer any connection — one that has not
// even attached, of any uid — with every client's pid, uid, control
// calls made, device and host memory held and channels open, and INFO
// with the engines' command, sleep and asleep counts: the very words the
// public pages no longer carry ("the command and sleep counts tell how
// much it runs"). The stranger (uid nobody) looks, a well-behaved client
// of another uid works, and the stranger looks again.

func init() {
	strangerRoles["peek-clients"] = peekClients
}

// peekClients connects as softgpu-smi does, reads INFO and waits for a
// line on stdin; then it prints, for every client of another uid that
// CLIENT_INFO or CLIENT_QUOTA describes, what they said of it, and each
// engine counter of INFO that moved meanwhile; then "done".
func peekClients(node, _ string) error {
	ctl, err := client.DialControl(node)
	if err != nil {
		return err
	}
	defer ctl.Close()
	before, err := ctl.Info()
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if err := waitLine(); err != nil {
		return err
	}
	me := uint32(os.Getuid())
	infos, err := ctl.Clients()
	if err != nil {
		return err
	}
	for _, ci := range infos {
		if ci.Uid != me && (ci.Calls != 0 || ci.DeviceMemory != 0 || ci.HostMemory != 0 || ci.Channels != 0) {
			fmt.Printf("CLIENT_INFO: uid %d pid %d: %d calls, %d device bytes, %d host bytes, %d channels\n",
				ci.Uid, ci.Pid, ci.Calls, ci.DeviceMemory, ci.HostMemory, ci.Channels)
		}
	}
	quotas, err := ctl.Quotas()
	if err != nil {
		return err
	}
	for _, q := range quotas {
		if q.Uid != me && q.Use.DeviceMemory != 0 {
			fmt.Printf("CLIENT_QUOTA: uid %d pid %d: use %+v\n", q.Uid, q.Pid, q.Use)
		}
	}
	after, err := ctl.Info()
	if err != nil {
		return err
	}
	for e := range before.Engines {
		b, a := before.Engines[e], after.Engines[e]
		if a.Commands != b.Commands {
			fmt.Printf("INFO: engine %d ran %d commands meanwhile\n", e, a.Commands-b.Commands)
		}
		if a.Sleeps != b.Sleeps {
			fmt.Printf("INFO: engine %d slept %d times meanwhile\n", e, a.Sleeps-b.Sleeps)
		}
	}
	fmt.Println("done")
	return nil
}

// TestAStrangerSeesNoOtherUsersCountersThroughTheControlCalls: while a
// stranger of another uid holds a control connection, a well-behaved
// client allocates 1 MiB and runs 37 NOPs; the stranger must learn
// neither the client's calls and memory (CLIENT_INFO, CLIENT_QUOTA) nor
// how many commands it ran (INFO).
func TestAStrangerSeesNoOtherUsersCountersThroughTheControlCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("needs root, to run the stranger as another uid")
	}
	d := startDaemon(t)
	s := startStranger(t, "peek-clients", d.node, "", cred)
	s.until(t, "ready")

	g, err := client.Dial(d.node)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	_, err = g.Alloc(1 << 20)
	require.NoError(t, err)
	for range 37 {
		require.NoError(t, g.Nop(client.Compute))
	}
	fmt.Fprintln(s.stdin)
	lines := s.findings(t)
	t.Logf("the stranger (uid %d) learnt: %q", cred.Uid, lines)
	assert.Empty(t, strings.Join(lines, "\n"), "the stranger read another user's client's counters")
	require.NoError(t, g.Close())
	d.live(t, "after the stranger")
	d.stop(t)
}
