package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// The page-table pool's quota. Tables cost by how sparse a mapping is,
// not how big: VAs are handed out in order and a freed one is not soon
// reused (driver/deferred.go), so a stranger that keeps a 4 KiB page,
// allocates 2 MiB and frees it, again and again, leaves each kept page
// alone in a 2 MiB region of its own, with a leaf table of its own. Well
// within any memory quota it empties the pool (1/16 of device memory,
// driver/vm.go) — and then no other client can ATTACH, since a new
// context needs a root table. Every context's tables are charged to its
// client (server/quota.go), and the default quota leaves every other
// context its root.

func init() {
	strangerRoles["sparse"] = sparse
}

// sparseCap stops the sparse role on a daemon without a quota on tables
// too: far more kept pages than a 16 MiB device's pool has leaf tables.
const sparseCap = 4096

// sparse keeps 4 KiB pages each alone in its 2 MiB of VA until a call is
// refused, reports how many it kept and how it was refused, says "done",
// and holds them all until it is killed.
func sparse(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		fmt.Println(errnoLine("dial", err))
		fmt.Println("done")
		return nil
	}
	kept := 0
	for ; kept < sparseCap; kept++ {
		if _, err = g.Alloc(4 << 10); err != nil {
			break
		}
		var big client.Ptr
		if big, err = g.Alloc(2 << 20); err != nil {
			break
		}
		if err = g.Free(big); err != nil {
			break
		}
	}
	fmt.Printf("kept %d\n", kept)
	fmt.Println(errnoLine("sparse", err))
	fmt.Println("done")
	select {} // hold its tables until killed
}

func TestAStrangerCannotEmptyThePageTablePool(t *testing.T) {
	d := startDaemon(t) // the default quotas: no flag needed
	cred, uid := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid than the well-behaved client, and only root can make it so")
	}
	s := startStranger(t, "sparse", d.node, "", cred)
	got := s.until(t, "done")
	require.Len(t, got, 2, "the stranger's findings: %q", got)
	assert.Equal(t, fmt.Sprintf("sparse errno=%d", uint32(uapi.ErrQuota)), got[1],
		"the sparse stranger's refusal (after %q); want ErrQuota, before the pool runs out", got[0])

	// (On to the rest when the refusal is wrong: the pool's exhaustion
	// shows next, as the well-behaved client's ATTACH.)
	// Its use is its limit's, or just short of it: the refused call's
	// tables went back.
	ctl := control(t, d.node)
	qs, err := ctl.Quotas()
	require.NoError(t, err)
	found := false
	for _, q := range qs {
		if q.Pid != uint32(s.cmd.Process.Pid) {
			continue
		}
		found = true
		t.Logf("the stranger: %q, its tables %d pages of its quota of %d", got, q.Use.PageTables, q.Limit.PageTables)
		assert.LessOrEqual(t, q.Use.PageTables, q.Limit.PageTables, "CLIENT_QUOTA of the stranger: tables used against the limit")
		assert.Greater(t, q.Use.PageTables, q.Limit.PageTables/2, "CLIENT_QUOTA of the stranger: tables used against the limit; want it refused near its limit, not sooner")
		assert.Equal(t, q.Use.PageTables, q.UidUse.PageTables, "CLIENT_QUOTA of the stranger, uid %d's tables: its one client's", uid)
	}
	require.True(t, found, "CLIENT_QUOTA does not list the stranger (pid %d)", s.cmd.Process.Pid)

	// A well-behaved client, of another uid when the test runs as root,
	// still ATTACHes and ALLOCs beside it: sparsely too, and a round trip.
	w := dialWellBehaved(t, d.node)
	for i := range 4 {
		_, err := w.g.Alloc(4 << 10)
		require.NoError(t, err, "the well-behaved client's Alloc %d of 4 KiB beside the stranger", i)
		big, err := w.g.Alloc(2 << 20)
		require.NoError(t, err, "the well-behaved client's Alloc %d of 2 MiB beside the stranger", i)
		require.NoError(t, w.g.Free(big), "the well-behaved client's Free %d of 2 MiB", i)
	}
	w.roundTrip(t, "beside the sparse stranger", 1)

	// Gone, the stranger's tables are refunded: the pool and the quota
	// have all of them back, and a second stranger is refused where the
	// first was.
	s.cmd.Process.Kill()
	s.cmd.Wait()
	waitClients(t, ctl, 2) // the well-behaved client and ctl
	again := startStranger(t, "sparse", d.node, "", cred).until(t, "done")
	require.Equal(t, got, again, "a second sparse stranger, after the first went")
	d.stop(t)
}
