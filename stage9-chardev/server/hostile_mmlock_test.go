package server_test

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
)

// A paged client's address space is its own, and so is the lock that
// guards it (the kernel's mmap lock): a thread of the client that holds
// it for writing — an mprotect over tens of thousands of populated
// mappings holds it for a sizeable fraction of a second, and the thread
// can do that again and again — makes every ioctl the daemon makes on the
// client's userfaultfd that needs it (UFFDIO_WRITEPROTECT takes it for
// reading) wait until it is let go. The daemon must not wait so with
// anything another client needs.

func init() {
	strangerRoles["mmlock"] = mmLockStranger
}

// mmLockStranger maps one 2 MiB memfd arg times (each its own mapping,
// populated), keeps a thread toggling the protection of all of them —
// its mmap lock held for writing most of the time — and says "ready";
// then, lap after lap, it makes a paged managed allocation of 1 MiB,
// moves it to the device, reads it back and frees it, until it is killed
// (the daemon, dropping it, closes its liveness socket).
func mmLockStranger(node, arg string) error {
	var maps int
	fmt.Sscan(arg, &maps)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	const size = 1 << 20
	const chunk = 2 << 20
	fd, err := unix.MemfdCreate("mmlock", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(fd, chunk); err != nil {
		return err
	}
	span := uintptr(chunk) * uintptr(maps)
	base, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return fmt.Errorf("reserving %d bytes: %v", span, errno)
	}
	for i := range uintptr(maps) {
		if _, _, errno := syscall.Syscall6(syscall.SYS_MMAP, base+i*chunk, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE, uintptr(fd), 0); errno != 0 {
			return fmt.Errorf("mapping %d: %v", i, errno)
		}
	}
	go func() {
		runtime.LockOSThread()
		prot := uintptr(unix.PROT_READ)
		for {
			syscall.Syscall(syscall.SYS_MPROTECT, base, span, prot)
			prot ^= unix.PROT_WRITE
		}
	}()
	fmt.Println("ready")
	for lap := 0; ; lap++ {
		lapStart := time.Now()
		// A new allocation each lap: its pages have never moved, so the
		// thrashing guard never maps them remotely, and every lap pages.
		m, err := g.AllocManaged(size)
		if err != nil {
			return fmt.Errorf("lap %d: AllocManaged: %w", lap, err)
		}
		if !m.Paged() {
			return fmt.Errorf("lap %d: the allocation is not paged", lap)
		}
		if err := g.Fill(m.Ptr(), size, byte(lap)); err != nil {
			return fmt.Errorf("lap %d: Fill: %w", lap, err)
		}
		host := m.Bytes()
		for i := 0; i < len(host); i += 4096 {
			if host[i] != byte(lap) {
				return fmt.Errorf("lap %d: the host reads %#x at %d", lap, host[i], i)
			}
		}
		if err := m.Free(); err != nil {
			return fmt.Errorf("lap %d: Free: %w", lap, err)
		}
		fmt.Fprintf(os.Stderr, "stranger lap %d: %v\n", lap, time.Since(lapStart))
	}
}

// TestAStrangersMmapLockStallsNoOtherClient: while a stranger holds its
// own mmap lock for writing, again and again, and has the daemon page
// its managed memory, a well-behaved client's managed pages still move
// both ways, and its laps — managed pages there and back, ALLOC and FREE,
// a round trip — stay within liveBound; SIGTERM still stops the daemon
// within stopBound. Before the pager's calls were bounded, the driver
// waited in the stranger's UFFDIO_WRITEPROTECT, page after page, with
// um.mu held: one lap took 13 s, its pages' move to the device waiting
// for um.mu.
func TestAStrangersMmapLockStallsNoOtherClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	s := startStranger(t, "mmlock", d.node, "16000", nil)
	s.until(t, "ready")
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	m, err := g.AllocManaged(64 << 10)
	require.NoError(t, err)
	require.True(t, m.Paged(), "the well-behaved client's allocation is paged")
	host := m.Bytes()
	w := dialWellBehaved(t, d.node)
	var worst time.Duration
	for lap, end := 0, time.Now().Add(8*time.Second); time.Now().Before(end); lap++ {
		var took [4]time.Duration
		start := time.Now()
		require.NoError(t, g.Fill(m.Ptr(), 64<<10, byte(lap+1)), "lap %d: Fill", lap)
		took[0] = time.Since(start)
		for i := 0; i < len(host); i += 4096 {
			require.Equal(t, byte(lap+1), host[i], "lap %d: the host's byte %d", lap, i)
		}
		took[1] = time.Since(start)
		p, err := g.Alloc(4096)
		require.NoError(t, err, "lap %d: Alloc", lap)
		require.NoError(t, g.Free(p))
		took[2] = time.Since(start)
		w.roundTrip(t, fmt.Sprintf("lap %d", lap), byte(lap))
		took[3] = time.Since(start)
		worst = max(worst, took[3])
		if took[3] > 50*time.Millisecond {
			t.Logf("lap %d: to the device %v, host faults %v, ALLOC and FREE %v, round trip %v", lap, took[0], took[1]-took[0], took[2]-took[1], took[3]-took[2])
		}
	}
	if worst > liveBound {
		t.Errorf("the well-behaved client's worst lap took %v; want under %v", worst, liveBound)
	}
	require.NoError(t, g.Close()) // disarms its liveness socket: the daemon's exit would kill this process
	t.Logf("stranger %d: %s", s.cmd.Process.Pid, s.stderr.String())
	t.Logf("SIGTERM: the daemon exited in %v", d.stop(t))
}
