package server_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
)

// The page-table pool's quota (server/quota.go, chargeTables) charges
// what the driver mapped, after it mapped: a call the driver fails is
// not charged, and so must leave no table behind. mapManaged once did:
// unlike mapAt, it left the tables it had made linked when leafEntry ran
// the pool out. A stranger at its quota then asked for one MANAGED_ALLOC
// needing more tables than the pool had left; the driver took every free
// page of the pool for it and failed, and the client kept them,
// uncharged, for as long as it stayed connected, so no other client could
// ATTACH (a root table each). A red-team helper found it.

func init() {
	strangerRoles["sparse-then-managed"] = sparseThenManaged
}

// sparseUntilRefused is the sparse role's loop on g: it keeps 4 KiB
// pages each alone in 2 MiB of VA until a call is refused.
func sparseUntilRefused(g *client.GPU) (int, error) {
	kept := 0
	for ; kept < sparseCap; kept++ {
		if _, err := g.Alloc(4 << 10); err != nil {
			return kept, err
		}
		big, err := g.Alloc(2 << 20)
		if err != nil {
			return kept, err
		}
		if err := g.Free(big); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

// sparseThenManaged (arg: bytes) goes sparse to its table quota, then
// asks for one managed allocation of arg bytes, says how each went and
// "done", and holds everything until killed.
func sparseThenManaged(node, arg string) error {
	size, _ := strconv.ParseUint(arg, 10, 64)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	kept, err := sparseUntilRefused(g)
	fmt.Printf("kept %d\n", kept)
	fmt.Println(errnoLine("sparse", err))
	_, err = g.AllocManaged(size)
	fmt.Println(errnoLine("managed", err))
	fmt.Println("done")
	select {}
}

// sparseTwice goes sparse on one connection until refused, then on a
// second connection of the same uid, says how each went and "done", and
// holds both until killed.
func sparseTwice(node, _ string) error {
	for i := range 2 {
		g, err := client.Dial(node)
		if err != nil {
			fmt.Println(errnoLine(fmt.Sprintf("dial %d", i), err))
			break
		}
		kept, err := sparseUntilRefused(g)
		fmt.Printf("conn %d kept %d: %s\n", i, kept, errnoLine("sparse", err))
	}
	fmt.Println("done")
	select {}
}

// TestAFailedManagedAllocKeepsNoUnchargedTables: a stranger of another
// uid at its quota of tables makes a MANAGED_ALLOC of 256 MiB (128 leaf
// tables; the operator has granted 300 MiB of pinned memory, so that is
// not what refuses it). The call fails — and a well-behaved client must
// still ATTACH beside it, and allocate. Before mapManaged gave back its
// tables, that ATTACH failed: "softgpu: out of device memory".
func TestAFailedManagedAllocKeepsNoUnchargedTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	pinned := strconv.Itoa(300 << 20)
	d := startDaemon(t, "-client-pinned", pinned, "-uid-pinned", pinned)
	s := startStranger(t, "sparse-then-managed", d.node, strconv.Itoa(256<<20), cred)
	got := s.until(t, "done")
	t.Logf("the stranger: %q", got)

	ctl := control(t, d.node)
	qs, err := ctl.Quotas()
	require.NoError(t, err)
	for _, q := range qs {
		if q.Pid == uint32(s.cmd.Process.Pid) {
			t.Logf("CLIENT_QUOTA of the stranger: tables %d of its quota of %d", q.Use.PageTables, q.Limit.PageTables)
		}
	}
	g, err := client.Dial(d.node)
	if err == nil {
		_, err = g.Alloc(4 << 10)
		g.Close()
	}
	assert.NoError(t, err, "a well-behaved client's Dial (ATTACH) and 4 KiB Alloc beside the stranger whose MANAGED_ALLOC failed")
	s.kill()
	d.stop(t)
}
