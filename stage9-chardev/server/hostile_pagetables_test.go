package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// Page-table memory comes back (issue 32, item 1, its last clause),
// across the boundary: page tables live in one device-wide pool, so a
// stranger that leaks them leaks them from every client. Mapping a 2 MiB
// page over a slot whose 4 KiB leaf table remained used to overwrite the
// table's entry and lose the table; 244 cycles of alloc 4 KiB / free /
// alloc 2 MiB / free, in one context, then left the pool room for 2
// contexts instead of 63, even after the context closed. The driver's
// TestPageTablesComeBack shows it in one process; here a stranger of
// another uid does the cycles against the real softgpud and exits, and a
// victim then opens as many contexts as it could on the fresh daemon.

func init() {
	strangerRoles["page-tables"] = churnPageTables
}

// pageTableCycles is how many alloc 4 KiB / free / alloc 2 MiB / free
// cycles the stranger runs: the count, which left 2 contexts of
// 63 on a daemon of 16 MiB (the harness's -mem).
const pageTableCycles = 244

// churnPageTables is the "page-tables" role: it dials, runs the cycles,
// says how many it ran, and exits (its connection closes: the daemon
// tears its context down).
func churnPageTables(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	n := 0
	for ; n < pageTableCycles; n++ {
		for _, size := range []uint64{4 << 10, 2 << 20} { // client.Alloc picks the page size the size fills
			p, err := g.Alloc(size)
			if err != nil {
				fmt.Printf("cycle %d: %s\n", n, errnoLine(fmt.Sprintf("alloc %d", size), err))
				fmt.Printf("cycles %d\n", n)
				fmt.Println("done")
				return nil
			}
			if err := g.Free(p); err != nil {
				return fmt.Errorf("cycle %d: Free(%v): %w", n, p, err)
			}
		}
	}
	fmt.Printf("cycles %d\n", n)
	fmt.Println("done")
	return nil
}

// contextsLeft opens raw connections that ATTACH, one context each, until
// the daemon refuses one or every context but the driver's is taken, and
// returns how many it got and the refusal (OK if none); it closes them
// all and waits until the daemon has torn them down (before clients are
// connected, ctl among them). It stops at the device's contexts, not
// past them: softgpud's cap on one uid's connections (64) would drop a
// connection first.
func contextsLeft(t *testing.T, node string, ctl *client.Control, before int) (int, uapi.Errno) {
	t.Helper()
	var conns []*rawConn
	refused := uapi.OK
	for len(conns) < abi.MaxContexts-1 {
		r := dialRaw(t, node)
		r.negotiate()
		var a uapi.Attach
		if refused, _ = r.call(&a); refused != uapi.OK {
			r.sock.Close()
			break
		}
		conns = append(conns, r)
	}
	for _, r := range conns {
		r.sock.Close()
	}
	waitClients(t, ctl, before)
	return len(conns), refused
}

func TestPageTablesComeBackAcrossTheBoundary(t *testing.T) {
	d := startDaemon(t)
	d.live(t, "before")
	ctl := control(t, d.node)
	const clients = 1 // ctl alone, once the probe's teardown is done
	waitClients(t, ctl, clients)
	fresh, why := contextsLeft(t, d.node, ctl, clients)
	require.Equal(t, abi.MaxContexts-1, fresh, "contexts on a fresh daemon (then %v)", why)

	cred, _ := strangerCred()
	got := startStranger(t, "page-tables", d.node, "", cred).findings(t)
	if want := fmt.Sprintf("cycles %d", pageTableCycles); len(got) == 0 || got[len(got)-1] != want {
		t.Errorf("the stranger's cycles: it said %q; want %q", got, want)
	}
	waitClients(t, ctl, clients) // the stranger's context is torn down

	after, why := contextsLeft(t, d.node, ctl, clients)
	assert.Equal(t, fresh, after, "after a stranger's %d cycles of alloc 4 KiB / free / alloc 2 MiB / free, and its exit: %d contexts (then %v); a fresh daemon had %d", pageTableCycles, after, why, fresh)
	d.live(t, "after the stranger's cycles")
	d.stop(t)
}
