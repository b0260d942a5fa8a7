package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/uapi"
)

// Quotas, per client and per uid, on every device-wide pool (issue 32,
// item 5): device memory, pinned host bytes (what the daemon locks,
// counting a sparse memfd's full size), DMA window entries, contexts and
// channels. A stranger that takes all it can gets its quota and then
// ErrQuota — not ErrNoMemory or ErrInval, so it can tell "the device is
// full" from "you have had your share" — and a well-behaved client of
// another uid still gets what it asks for. (Connections per uid are the
// accept loop's cap, tested beside it.)

func init() {
	strangerRoles["hoard"] = hoard
}

// hoard takes all it can of every pool, one unit at a time, reports how
// many units it got and how the next was refused, says "done", and holds
// all of it until it is killed. Each loop stops at a cap far above any
// quota the test sets, so that on a daemon without quotas it ends too.
func hoard(node, _ string) error {
	g, err := client.Dial(node) // one context and two channels
	if err != nil {
		fmt.Println(errnoLine("dial", err))
		fmt.Println("done")
		return nil
	}
	take := func(name string, limit int, one func() error) {
		n := 0
		for ; n < limit; n++ {
			if err := one(); err != nil {
				fmt.Printf("%s %d\n", name, n)
				fmt.Println(errnoLine(name, err))
				return
			}
		}
		fmt.Printf("%s %d\n", name, n)
	}
	take("alloc", 64, func() error { _, err := g.Alloc(1 << 20); return err })
	// A sparse memfd of 1 GiB: no page of it is touched here, but the
	// daemon would lock every byte of it.
	_, err = g.HostAlloc(1 << 30)
	fmt.Println(errnoLine("pinned", err))
	take("hostalloc", 64, func() error { _, err := g.HostAlloc(64 << 10); return err })
	take("channel", 200, func() error {
		_, err := g.NewChannel(client.Copy, client.ChannelOptions{Priority: softgpu.PriorityNormal})
		return err
	})
	fmt.Println("done")
	select {} // hold it all until killed
}

// quotaFlags are the quotas the test sets: a client may have 4 MiB of
// device memory beside its 4 channels' context-save areas, 4 MiB pinned,
// 3 window entries, 4 channels and 40 pages of tables; all the clients of
// one uid together 6 MiB beside 6 areas, 8 MiB, 5 entries, 6 channels, 2
// contexts and 60 pages of tables (more than the hoard's mappings need:
// hostile_tables_test.go meets the tables' quota).
var quotaFlags = []string{
	"-client-memory", strconv.Itoa(clientMemory), "-uid-memory", strconv.Itoa(uidMemory),
	"-client-pinned", strconv.Itoa(4 << 20), "-uid-pinned", strconv.Itoa(8 << 20),
	"-client-window", "3", "-uid-window", "5",
	"-client-channels", "4", "-uid-channels", "6",
	"-uid-contexts", "2",
	"-client-tables", "40", "-uid-tables", "60",
}

// clientMemory and uidMemory are the device-memory quotas: the MiBs the
// hoard allocates, and the save areas of the channels it may open.
const (
	clientMemory = 4<<20 + 4*device.DefaultContextSize
	uidMemory    = 6<<20 + 6*device.DefaultContextSize
)

func TestAStrangerGetsItsQuotaAndNoMore(t *testing.T) {
	d := startDaemon(t, quotaFlags...)
	w := dialWellBehaved(t, d.node)
	w.roundTrip(t, "before", 1)
	cred, _ := strangerCred()
	quota := fmt.Sprintf("errno=%d", uint32(uapi.ErrQuota))
	check := func(who string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", who, got, want)
		}
	}
	// The first stranger meets its client quotas: 4 × 1 MiB; 1 GiB
	// pinned refused before a byte is locked; 3 × 64 KiB (3 entries); 2
	// channels beside its own 2.
	first := startStranger(t, "hoard", d.node, "", cred)
	check("the first stranger", first.until(t, "done"), []string{
		"alloc 4", "alloc " + quota, "pinned " + quota,
		"hostalloc 3", "hostalloc " + quota, "channel 2", "channel " + quota})
	w.roundTrip(t, "beside the first stranger", 2)
	// The second, of the same uid, meets the uid's: 2 MiB more of 6; two
	// entries more of 5; no channel more of 6 (its own 2 make 6).
	second := startStranger(t, "hoard", d.node, "", cred)
	check("the second stranger, of the same uid", second.until(t, "done"), []string{
		"alloc 2", "alloc " + quota, "pinned " + quota,
		"hostalloc 2", "hostalloc " + quota, "channel 0", "channel " + quota})
	// A third of the same uid would be a third context of 2.
	check("the third stranger, of the same uid", startStranger(t, "hoard", d.node, "", cred).findings(t),
		[]string{"dial " + quota})

	// The well-behaved client, another uid, gets its own share in full.
	for i := range 4 {
		_, err := w.g.Alloc(1 << 20)
		require.NoError(t, err, "the well-behaved client's Alloc %d of 1 MiB beside the strangers", i)
	}
	if _, err := w.g.HostAlloc(64 << 10); err != nil {
		t.Fatalf("the well-behaved client's HostAlloc beside the strangers: %v", err)
	}
	if ch, err := w.g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityNormal}); err != nil {
		t.Fatalf("the well-behaved client's NewChannel beside the strangers: %v", err)
	} else {
		ch.Close()
	}
	w.roundTrip(t, "beside both strangers", 3)

	// The daemon reports each client's use against its quotas.
	ctl := control(t, d.node)
	qs, err := ctl.Quotas()
	require.NoError(t, err)
	found := false
	for _, q := range qs {
		if q.Pid != uint32(first.cmd.Process.Pid) {
			continue
		}
		found = true
		// Its tables depend on where the driver put its mappings: some
		// beyond its root, and the uid's are both strangers'.
		tables, uidTables := q.Use.PageTables, q.UidUse.PageTables
		assert.Greater(t, tables, uint32(2), "CLIENT_QUOTA of the first stranger: its tables; want more than its root's")
		assert.Greater(t, uidTables, tables, "CLIENT_QUOTA of the first stranger: its uid's tables; want the second stranger's too")
		want := uapi.ClientQuota{Index: q.Index, Pid: q.Pid, Uid: q.Uid, Context: q.Context,
			Use:      uapi.Pools{DeviceMemory: clientMemory, PinnedBytes: 3 * 64 << 10, WindowEntries: 3, Contexts: 1, Channels: 4, PageTables: tables},
			Limit:    uapi.Pools{DeviceMemory: clientMemory, PinnedBytes: 4 << 20, WindowEntries: 3, Contexts: 1, Channels: 4, PageTables: 40},
			UidUse:   uapi.Pools{DeviceMemory: uidMemory, PinnedBytes: 5 * 64 << 10, WindowEntries: 5, Contexts: 2, Channels: 6, PageTables: uidTables},
			UidLimit: uapi.Pools{DeviceMemory: uidMemory, PinnedBytes: 8 << 20, WindowEntries: 5, Contexts: 2, Channels: 6, PageTables: 60}}
		assert.Equal(t, want, q, "CLIENT_QUOTA of the first stranger")
	}
	if !found {
		t.Errorf("CLIENT_QUOTA does not list the first stranger (pid %d)", first.cmd.Process.Pid)
	}

	// Gone, the strangers give every unit back: a new one gets its
	// client quotas again.
	first.cmd.Process.Kill()
	second.cmd.Process.Kill()
	first.cmd.Wait()
	second.cmd.Wait()
	waitClients(t, ctl, 2)
	check("a stranger after the first two went", startStranger(t, "hoard", d.node, "", cred).until(t, "done"), []string{
		"alloc 4", "alloc " + quota, "pinned " + quota,
		"hostalloc 3", "hostalloc " + quota, "channel 2", "channel " + quota})
	w.roundTrip(t, "after", 4)
	d.stop(t)
}
