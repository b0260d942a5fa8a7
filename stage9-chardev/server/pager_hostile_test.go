package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// The pager's failure and isolation cases (pager.go): what a client may
// send MANAGED_PAGER, fault messages outside an allocation, duplicate
// fault deliveries, and the daemon's death under a client's feet.

// TestManagedPagerRefusesWhatIsNotItsOwn: MANAGED_PAGER takes only a
// userfaultfd on which the allocation's own range is registered for
// write-protect faults, for an allocation of the caller's, once.
func TestManagedPagerRefusesWhatIsNotItsOwn(t *testing.T) {
	s := serve(t, server.Config{})
	r := dialRaw(t, s.Node())
	r.attach()
	const length = 4 << 12
	memfd := newMemfd(t, length, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	defer unix.Close(memfd)
	mapping := mapMemfd(t, memfd, length)
	alloc := uapi.ManagedAlloc{Size: length, Length: length}
	r.mustCall(&alloc, memfd)
	sock, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(sock[0])
	defer unix.Close(sock[1])
	// A userfaultfd of this process with nothing registered: the daemon
	// (in this process too) must refuse it before it could ever page it.
	fd, err := uffd.Open(0, uffd.FeatureWPShmem)
	if err != nil {
		t.Skipf("userfaultfd not permitted here: %v", err)
	}
	defer unix.Close(fd)
	base := uffd.Address(mapping)
	tests := []struct {
		name string
		arg  uapi.ManagedPager
		fds  []int
		want uapi.Errno
	}{
		{"not its allocation", uapi.ManagedPager{VA: alloc.VA + 1<<30, Base: base, Length: length}, []int{fd, sock[1]}, uapi.ErrNoEntry},
		{"a memfd for a userfaultfd", uapi.ManagedPager{VA: alloc.VA, Base: base, Length: length}, []int{memfd, sock[1]}, uapi.ErrInval},
		{"a memfd for the liveness socket", uapi.ManagedPager{VA: alloc.VA, Base: base, Length: length}, []int{fd, memfd}, uapi.ErrInval},
		{"a length not the allocation's", uapi.ManagedPager{VA: alloc.VA, Base: base, Length: 2 * length}, []int{fd, sock[1]}, uapi.ErrInval},
		{"a base off the page", uapi.ManagedPager{VA: alloc.VA, Base: base + 8, Length: length}, []int{fd, sock[1]}, uapi.ErrInval},
		{"unknown flags", uapi.ManagedPager{VA: alloc.VA, Base: base, Length: length, Flags: 1 << 7}, []int{fd, sock[1]}, uapi.ErrInval},
		{"a range not registered", uapi.ManagedPager{VA: alloc.VA, Base: base, Length: length}, []int{fd, sock[1]}, uapi.ErrInval},
	}
	for _, tt := range tests {
		if got, _ := r.call(&tt.arg, tt.fds...); got != tt.want {
			t.Errorf("MANAGED_PAGER with %s = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// uffdMsg is a fault message for address, as the kernel writes one.
func uffdMsg(event byte, address uint64) []byte {
	msg := make([]byte, uffd.MsgSize)
	msg[0] = event
	binary.LittleEndian.PutUint64(msg[16:], address)
	return msg
}

// TestPagerTurnsAwayFaultsOutsideItsAllocation: a fault message whose
// address lies outside the allocation the userfaultfd came with (a
// client can register more of its address space with it) never reaches
// the allocation; nor does a message that is not a fault.
func TestPagerTurnsAwayFaultsOutsideItsAllocation(t *testing.T) {
	const base, length = 0x7f0000000000, 16 << 12
	for _, tt := range []struct {
		name string
		msg  []byte
		away bool
	}{
		{"below", uffdMsg(uffd.EventPagefault, base-1), true},
		{"just past the end", uffdMsg(uffd.EventPagefault, base+length), true},
		{"far past the end", uffdMsg(uffd.EventPagefault, 1<<63), true},
		{"not a fault", uffdMsg(0x13, base), true},
		{"inside", uffdMsg(uffd.EventPagefault, base+length-1), false},
	} {
		assert.Equal(t, tt.away, server.ServeFaultMessage(base, length, tt.msg), "a fault message %s: turned away", tt.name)
	}
}

// TestPagerDuplicateFaultsRewriteNothing: with every fault message
// delivered a second time, after the client has had its page and may
// have written it, the pager role's checks all hold — no duplicate brings
// a stale page back over the host's writes — and the daemon counted the
// duplicates as such.
func TestPagerDuplicateFaultsRewriteNothing(t *testing.T) {
	server.ReplayFaults(true)
	defer server.ReplayFaults(false)
	s := serve(t, server.Config{})
	startChild(t, "pager", s.Node(), 7, 2).succeed(t)
	st := s.ManagedStats()
	if st.HostDuplicates < st.HostFaults/2 {
		t.Errorf("%d duplicate host faults for %d served; want every replayed one counted as a duplicate", st.HostDuplicates, st.HostFaults)
	}
}

// pagerVictim is the "pagervictim" role: it keeps moving a managed
// allocation to the device and reading it back on the host, and prints
// "ready" after its first lap. The test kills the daemon under it. A
// call that fails (the daemon is gone) makes it wait 30 s and exit 3 — so
// the test tells the liveness socket's SIGKILL from a client that merely
// noticed.
func pagerVictim(node string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	m, err := g.AllocManaged(1 << 20)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return errors.New("the allocation is not paged")
	}
	host := m.Bytes()
	for lap := 0; ; lap++ {
		if err := g.Fill(m.Ptr(), 1<<20, byte(lap)); err != nil {
			fmt.Fprintln(os.Stderr, "Fill:", err)
			time.Sleep(30 * time.Second)
			os.Exit(3)
		}
		for i := 0; i < len(host); i += 4096 {
			if host[i] != byte(lap) {
				return fmt.Errorf("lap %d: the host reads %#x at %d", lap, host[i], i)
			}
		}
		if lap == 0 {
			fmt.Println("ready")
		}
	}
}

// TestDaemonDeathKillsAPagedClient: softgpud killed while a client's
// pages move between the device and the host: the client, whether it was
// waiting in a fault or in a call, is killed with SIGKILL — never left
// waiting for an answer, never reading zero pages.
func TestDaemonDeathKillsAPagedClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	c := startChild(t, "pagervictim", d.node, 0, 0)
	c.expect(t, "ready")
	time.Sleep(20 * time.Millisecond) // well into its laps
	require.NoError(t, d.cmd.Process.Kill())
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("the client exited with %v; want killed by SIGKILL", err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the client ended with %v; want killed by SIGKILL\n%s", ee, c.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the client still runs 10 s after the daemon died")
	}
}
