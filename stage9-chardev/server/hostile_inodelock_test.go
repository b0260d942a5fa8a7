package server_test

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/uffd"
)

// The pager's one call that sleeps uninterruptibly on a lock the client
// can hold for good: the punch, made by a helper process (punch.go).

func init() {
	strangerRoles["inodelock"] = inodeLockForever
}

// inodeLockForever holds its own managed allocation's memfd's inode lock
// for good: a thread pwrite()s into the memfd from a buffer registered,
// missing mode, with a second userfaultfd of its own that nobody reads —
// the write's fault-in waits in the kernel with inode_lock held. (A
// kernel-mode fault needs a userfaultfd made without UFFD_USER_MODE_ONLY:
// root, CAP_SYS_PTRACE, vm.unprivileged_userfaultfd=1, or access to
// /dev/userfaultfd.) It disarms its liveness sockets, so the daemon's
// drop does not kill it, then has the device write the allocation: the
// fault handler's Remove — fallocate(PUNCH_HOLE) on the memfd — waits for
// that lock. It says how the Fill went and "done", and holds on.
func inodeLockForever(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	const size = 64 << 10
	m, err := g.AllocManaged(size)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("the allocation is not paged")
	}
	base := uffd.Address(m.Bytes())
	memfd, err := unix.Open(fmt.Sprintf("/proc/self/map_files/%x-%x", base, base+size), unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("reopening the memfd: %w", err)
	}
	u, err := uffd.Open(0, 0)
	if err != nil {
		return err
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	if err := uffd.Register(u, uffd.Address(buf), 4096, uffd.ModeMissing); err != nil {
		return err
	}
	disarmSockets()
	go func() {
		runtime.LockOSThread()
		for {
			n, err := unix.Pwrite(memfd, buf, 0) // sleeps in the fault-in, inode_lock held
			fmt.Fprintf(os.Stderr, "pwrite returned %d, %v\n", n, err)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	fmt.Println(errnoLine("fill", g.Fill(m.Ptr(), size, 1)))
	fmt.Println("done")
	select {}
}

// TestAStrangerHoldingItsMemfdLockCannotWedgeSIGTERM: a stranger that
// holds its own memfd's inode lock for good (inodeLockForever) is dropped
// at the first bounded call, as designed; and the call, a fallocate that
// waits on the lock uninterruptibly and cannot be killed, was made by a
// punch helper, not by a thread of the daemon's. So SIGTERM stops the
// daemon within stopBound; the stuck helper, let go, outlives it, and
// ends once the stranger lets go of the lock. Made in the daemon's own
// process, as it was before the helper, the fallocate kept the daemon
// alive past SIGTERM, with one of its threads asleep in it, until the
// stranger was killed.
func TestAStrangerHoldingItsMemfdLockCannotWedgeSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	if os.Getuid() != 0 {
		t.Skip("a kernel-mode userfaultfd needs root here (vm.unprivileged_userfaultfd=0)")
	}
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	s := startStranger(t, "inodelock", d.node, "", nil)
	t.Logf("the stranger: %q", s.until(t, "done"))
	waitFor(t, "the daemon dropping the stranger", func() (bool, string) {
		return dropped(d.log()) != "", d.log()
	})
	t.Logf("dropped: %s", dropped(d.log()))
	d.live(t, "after the stranger was dropped")
	assert.Zero(t, dStateThreads(pid), "the daemon's threads asleep uninterruptibly: the punch was made in the daemon's own process")
	var stuck []int
	waitFor(t, "a punch helper asleep on the stranger's lock", func() (bool, string) {
		stuck = stuckChildren(pid)
		return len(stuck) > 0, "none of the daemon's children is in uninterruptible sleep"
	})
	start := time.Now()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-d.exited:
		d.exited <- err
		t.Logf("SIGTERM: the daemon exited in %v, its helper %v still stuck: %v", time.Since(start), stuck, err)
		assert.NoError(t, err)
	case <-time.After(stopBound):
		t.Errorf("softgpud still running %v after SIGTERM, %d of its threads in uninterruptible sleep (its stranger still alive)\n%s",
			stopBound, dStateThreads(pid), d.log())
	}
	s.kill() // lets the lock go
	for _, helper := range stuck {
		waitFor(t, fmt.Sprintf("the let-go helper %d ending once the stranger is gone", helper), func() (bool, string) {
			state, _ := procState(fmt.Sprintf("/proc/%d/stat", helper))
			return state == 0 || state == 'Z', fmt.Sprintf("its state is %q", state)
		})
	}
}
