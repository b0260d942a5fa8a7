package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

// The attack: a stranger reads another client's device memory through a
// restoreHost Fill that outlives its bound.
//
// When a run of managed pages moves to the device and the punch of their
// host pages fails (Remove), moveRun has the pager put each page back
// (restoreHost) with a Fill whose source is the device frame itself
// (mem[f:f+page]), and frees the frames right after. A Fill the client
// holds up past pagerBound is given up on and the client dropped, but the
// UFFDIO_COPY itself goes on, on its goroutine, and reads its source when
// the client lets its lock go — by then the frame may be another
// client's. The stranger arranges every part of that:
//
//   - its MANAGED_ALLOC memfd (X) is sealed F_SEAL_FUTURE_WRITE after the
//     daemon has mapped it, so every punch fails (EPERM), cheaply;
//   - the range it registers for MANAGED_PAGER is a mapping of another
//     memfd (Y), whose pages are holes, so a Fill there copies (it would
//     find X's page there and stop at EEXIST);
//   - right after the daemon's Protect (seen in /proc/self/pagemap's
//     uffd-wp bit) it mprotects a span that starts at Y and runs over
//     thousands of populated mappings: Y's VMA is write-locked for the
//     whole call, so the Fill's UFFDIO_COPY waits.
//
// The daemon judges the Fill stuck, drops the stranger, frees the frame;
// a well-behaved client's next move to the device takes it and writes its
// bytes there; then the mprotect ends and the Fill copies those bytes
// into the stranger's Y.

func init() {
	strangerRoles["restore-leak"] = restoreLeakStranger
}

// liteConn is a raw client for a stranger process (no testing.TB).
type liteConn struct {
	sock *net.UnixConn
	seq  uint64
}

func (r *liteConn) call(arg uapi.Arg, fds ...int) (uapi.Errno, []int, error) {
	r.seq++
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := r.sock.WriteMsgUnix(uapi.EncodeCall(r.seq, arg), oob, nil); err != nil {
		return 0, nil, err
	}
	buf := make([]byte, uapi.MaxMessage+1)
	rb := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
	n, oobn, _, _, err := r.sock.ReadMsgUnix(buf, rb)
	if err != nil {
		return 0, nil, err
	}
	if n == 0 && oobn == 0 {
		return 0, nil, errors.New("the daemon closed the connection")
	}
	got := parseRights(rb[:oobn])
	h, err := uapi.DecodeReply(buf[:n], len(got), arg)
	if err != nil {
		return 0, got, err
	}
	return h.Errno, got, nil
}

func (r *liteConn) must(arg uapi.Arg, fds ...int) ([]int, error) {
	errno, got, err := r.call(arg, fds...)
	if err != nil {
		return got, fmt.Errorf("%T: %w", arg, err)
	}
	if errno != uapi.OK {
		return got, fmt.Errorf("%T: %w", arg, errno)
	}
	return got, nil
}

// restoreLeakStranger is the attack above, lap after lap (arg: "maps
// laps"), each on a new allocation. Each lap it prints a line; the lap on
// which the daemon dropped it prints "y page 0: ..." with the bytes its Y
// holds after the mprotect, and the stranger ends with "done".
func restoreLeakStranger(node, arg string) error {
	var maps, laps int
	fmt.Sscan(arg, &maps, &laps)
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	r := &liteConn{sock: sock}
	if _, err := r.must(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		return err
	}
	fds, err := r.must(&uapi.Attach{})
	if err != nil {
		return err
	}
	for _, fd := range fds {
		unix.Close(fd)
	}

	const page = 4096
	const length = 16 * page
	const chunk = 2 << 20
	span := uintptr(length) + uintptr(maps)*chunk
	base, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return fmt.Errorf("reserving: %v", errno)
	}
	y, err := unix.MemfdCreate("y", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(y, length); err != nil {
		return err
	}
	if _, _, errno := syscall.Syscall6(syscall.SYS_MMAP, base, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED, uintptr(y), 0); errno != 0 {
		return fmt.Errorf("mapping y: %v", errno)
	}
	s, err := unix.MemfdCreate("storm", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.Ftruncate(s, chunk); err != nil {
		return err
	}
	for i := range uintptr(maps) {
		if _, _, errno := syscall.Syscall6(syscall.SYS_MMAP, base+length+i*chunk, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED|unix.MAP_POPULATE, uintptr(s), 0); errno != 0 {
			return fmt.Errorf("mapping %d: %v", i, errno)
		}
	}
	flags := uint64(0)
	ufd, err := uffd.Open(0, uffd.FeatureWPShmem)
	if errors.Is(err, unix.EPERM) {
		flags = uapi.PagerUserModeOnly
		ufd, err = uffd.Open(uffd.UserModeOnly, uffd.FeatureWPShmem)
	}
	if err != nil {
		return fmt.Errorf("userfaultfd: %w", err)
	}
	if err := uffd.Register(ufd, uint64(base), length, uffd.ModeMissing|uffd.ModeWP); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	pm, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	wp := func() bool {
		var b [8]byte
		if n, err := unix.Pread(pm, b[:], int64(base/page)*8); err != nil || n != 8 {
			return false
		}
		return binary.LittleEndian.Uint64(b[:])&(1<<57) != 0
	}
	storm := func() time.Duration {
		start := time.Now()
		syscall.Syscall(syscall.SYS_MPROTECT, base, span, unix.PROT_READ)
		took := time.Since(start)
		syscall.Syscall(syscall.SYS_MPROTECT, base, span, unix.PROT_READ|unix.PROT_WRITE)
		return took
	}
	fmt.Fprintf(os.Stderr, "one mprotect of the span: %v\n", storm())
	fmt.Println("ready")

	own := make([]byte, length)
	for i := range own {
		own[i] = 0x11
	}
	for lap := 0; lap < laps; lap++ {
		x, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return err
		}
		unix.Ftruncate(x, length)
		unix.FcntlInt(uintptr(x), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		unix.Pwrite(x, own, 0)
		ma := uapi.ManagedAlloc{Size: length, Length: length}
		if _, err := r.must(&ma, x); err != nil {
			return fmt.Errorf("lap %d: %w", lap, err)
		}
		// After the daemon mapped it: every punch of X now fails, EPERM.
		if _, err := unix.FcntlInt(uintptr(x), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); err != nil {
			return fmt.Errorf("lap %d: sealing x: %w", lap, err)
		}
		// Y's pages are holes: a Fill there copies.
		unix.Fallocate(y, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, length)
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if _, err := r.must(&uapi.ManagedPager{VA: ma.VA, Base: uint64(base), Length: length, Flags: flags}, ufd, pair[1]); err != nil {
			fmt.Printf("lap %d: no pager: %v\n", lap, err)
			return nil
		}
		unix.Close(pair[1])

		var stop atomic.Bool
		var held time.Duration
		var seen bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for !stop.Load() {
				if wp() { // the daemon's Protect is done: its Fill comes next
					seen = true
					held = storm()
					return
				}
			}
		}()
		errno, _, cerr := r.call(&uapi.ManagedPrefetch{VA: ma.VA, Offset: 0, Size: page, To: client.ToDevice})
		stop.Store(true)
		wg.Wait()
		dropped := cerr != nil
		fmt.Fprintf(os.Stderr, "lap %d: prefetch errno=%v err=%v, protect seen %v, mprotect held %v\n", lap, errno, cerr, seen, held)
		if dropped {
			time.Sleep(200 * time.Millisecond) // the Fill ran once the mprotect ended
			got := make([]byte, page)
			unix.Pread(y, got, 0)
			counts := map[byte]int{}
			for _, b := range got {
				counts[b]++
			}
			fmt.Printf("y page 0: %v (own bytes 0x11, prefetch err %v, mprotect %v)\n", counts, cerr, held)
			break
		}
		if _, err := r.must(&uapi.ManagedFree{VA: ma.VA}); err != nil {
			return fmt.Errorf("lap %d: %w", lap, err)
		}
		unix.Close(pair[0])
		unix.Close(x)
	}
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotReadAnotherClientsFramesThroughAStuckRestore: a
// stranger (uid nobody) makes the daemon's restoreHost Fill wait on its
// own mmap lock past the bound; it is dropped and its frame freed, while
// a well-behaved client moves pages holding a secret (0xc3) to the
// device. The stranger's pages must never hold the well-behaved client's
// bytes.
func TestAStrangerCannotReadAnotherClientsFramesThroughAStuckRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	s := startStranger(t, "restore-leak", d.node, "12000 300", &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
	s.until(t, "ready")

	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	const secret = 0xc3
	var stop atomic.Bool
	victimDone := make(chan error, 1)
	go func() {
		var held []*client.Managed
		defer func() {
			for _, m := range held {
				m.Free()
			}
		}()
		for !stop.Load() {
			m, err := g.AllocManaged(64 << 10)
			if err != nil {
				victimDone <- err
				return
			}
			b := m.Bytes()
			for i := range b {
				b[i] = secret
			}
			mg, err := m.Prefetch(0, 64<<10, client.ToDevice)
			if err == nil {
				err = mg.Wait()
			}
			if err != nil {
				victimDone <- err
				return
			}
			held = append(held, m)
			if len(held) > 8 {
				held[0].Free()
				held = held[1:]
			}
		}
		victimDone <- nil
	}()
	lines := s.findings(t)
	stop.Store(true)
	require.NoError(t, <-victimDone, "the well-behaved client")
	t.Logf("stranger said %q; stderr:\n%s\ndaemon:\n%s", lines, s.stderr.String(), dropped(d.log()))
	for _, line := range lines {
		require.NotContains(t, line, fmt.Sprintf("%d:", secret), "the stranger's page holds the well-behaved client's bytes (%#x)", secret)
	}
	require.NoError(t, g.Close())
	d.stop(t)
}
