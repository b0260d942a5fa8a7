package server_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestARedialingLockHolderStrandsOneHelperPerBar: a root stranger
// holding its memfd's inode lock for good (inodeLockForever) strands one
// punch helper, asleep on that lock, per incident. Three such strangers
// of the same uid, one after the other and all holding on, strand one
// helper, not three: the uid is barred after the first, so the others
// get no pager (and make no punch). The daemon's own descriptors grow by
// at most a few per stranded helper (its pidfd). The count per uid is
// bounded by the bars' doubling (one per barFirst at first, then fewer),
// not by a cap — a root stranger that takes other uids could strand one
// per uid, but root needs no helper to harm the daemon.
func TestARedialingLockHolderStrandsOneHelperPerBar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if os.Getuid() != 0 {
		t.Skip("a kernel-mode userfaultfd needs root here (vm.unprivileged_userfaultfd=0)")
	}
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	startStranger(t, "pagercycles", d.node, "1", nil).findings(t) // the fault loop and an idle helper, first
	time.Sleep(100 * time.Millisecond)
	fds0, _, _ := procCounts(pid)
	var said []string
	for i := range 3 {
		s := startStranger(t, "inodelock", d.node, "", nil)
		if i > 0 { // barred: MANAGED_PAGER is refused, and the role gives up ("not paged")
			select {
			case <-time.After(patience):
				t.Fatalf("stranger %d neither paged nor gave up", i)
			case _, ok := <-s.lines:
				_ = ok
			}
			s.cmd.Wait()
			said = append(said, s.stderr.String())
			continue
		}
		said = append(said, fmt.Sprint(s.until(t, "done")))
		if i == 0 {
			waitFor(t, "a helper stuck on the first stranger's lock", func() (bool, string) {
				return len(stuckChildren(pid)) == 1, fmt.Sprint(stuckChildren(pid))
			})
		}
		time.Sleep(300 * time.Millisecond)
	}
	fds, threads, helpers := procCounts(pid)
	stuck := stuckChildren(pid)
	t.Logf("the strangers said %q; the daemon: %d descriptors (%d before), %d threads, %d helpers, %d stuck", said, fds, fds0, threads, helpers, len(stuck))
	assert.Len(t, stuck, 1, "helpers stranded on the strangers' locks")
	assert.LessOrEqual(t, fds, fds0+4, "the daemon's descriptors with one helper stranded")
	d.live(t, "with the helper stranded")
	d.stop(t)
}
