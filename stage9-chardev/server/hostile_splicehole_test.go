package server_test

// A closed channel's pages could outlive its files (the red team of
// 2026-12-06, TestAStrangerCannotKeepClosedChannelsPagesInPipes): the
// daemon wrote the pages of the two memfds CHANNEL_OPEN hands out, and so
// allocated them; splice(2) from a memfd into a pipe keeps references to
// its pages after its inode has gone, and with it the linger's charge
// (linger.go). Since 3.0 the daemon touches no page of either file: the
// client allocates every one of them before CHANNEL_START, which refuses
// a file with a hole and then seals the user file, so that no hole can
// appear again and the daemon never allocates a page of either. These
// tests are the stranger's side of that, each a process of its own.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["sh-start"] = startUnpopulated
	strangerRoles["sh-splice"] = spliceStartedChannels
}

// attachedStranger dials node and makes VERSION and ATTACH, for a role.
func attachedStranger(node string) (*net.UnixConn, error) {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	if _, err := strangerCall(sock, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		sock.Close()
		return nil, err
	}
	if _, err := strangerCall(sock, &uapi.Attach{}); err != nil {
		sock.Close()
		return nil, err
	}
	return sock, nil
}

// allocated returns the bytes of fd's first size that are not hole, as
// SEEK_DATA and SEEK_HOLE say: what the file's pages hold allocated.
func allocated(fd int, size int64) int64 {
	var n int64
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil || data >= size { // ENXIO: hole to the end
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			break
		}
		n += min(hole, size) - data
		off = hole
	}
	return n
}

// populate maps a channel's two memfds as a client does and allocates
// every page of both from this process: a store to each page of the user
// memfd, a load from each page of the status memfd (MADV_POPULATE_WRITE
// and _READ fault each page in as a store or a load would). It returns
// the user mapping, writable, and the status mapping, read-only.
func populate(fds []int, co *uapi.ChannelOpen) (user, status []byte, err error) {
	user, err = unix.Mmap(fds[uapi.ChannelFDUser], 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping the user memfd: %w", err)
	}
	status, err = unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(co.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(user)
		return nil, nil, fmt.Errorf("mapping the status memfd: %w", err)
	}
	if err := populateMapped(user, status); err != nil {
		unix.Munmap(user)
		unix.Munmap(status)
		return nil, nil, err
	}
	return user, status, nil
}

// populateMapped allocates every page of a channel's memfds through
// their mappings, user writable and status read-only, as populate does.
func populateMapped(user, status []byte) error {
	if err := unix.Madvise(user, unix.MADV_POPULATE_WRITE); err != nil {
		return fmt.Errorf("MADV_POPULATE_WRITE of the user memfd: %w", err)
	}
	if err := unix.Madvise(status, unix.MADV_POPULATE_READ); err != nil {
		return fmt.Errorf("MADV_POPULATE_READ of the status memfd: %w", err)
	}
	return nil
}

// errnoName is how a role reports a system call's outcome: "ok", or the
// errno's name.
func errnoName(err error) string {
	var e unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// holes says how much of a channel's two memfds is allocated.
func holes(fds []int, co *uapi.ChannelOpen) string {
	say := func(fd int, size uint64) string {
		switch n := allocated(fd, int64(size)); {
		case n == 0:
			return "all hole"
		case n == int64(size):
			return "no hole"
		default:
			return fmt.Sprintf("%d of %d bytes allocated", n, size)
		}
	}
	return fmt.Sprintf("user %s, status %s", say(fds[uapi.ChannelFDUser], co.UserSize), say(fds[uapi.ChannelFDStatus], co.StatusSize))
}

// startUnpopulated is a stranger that starts a channel without touching
// its pages, then punches holes in a started one's files, and says what
// the daemon and the kernel answered, a line each.
func startUnpopulated(node, _ string) error {
	sock, err := attachedStranger(node)
	if err != nil {
		return err
	}
	co := &uapi.ChannelOpen{Engine: uint32(abi.EngineCopy), Priority: uint32(abi.PriorityNormal)}
	fds, err := strangerCall(sock, co)
	if err != nil {
		return fmt.Errorf("CHANNEL_OPEN: %w", err)
	}
	fmt.Println("opened: " + holes(fds, co))
	_, err = strangerCall(sock, &uapi.ChannelStart{Channel: co.Channel})
	fmt.Println(errnoLine("start unpopulated", err))
	fmt.Println("after the refused start: " + holes(fds, co))

	user, status, err := populate(fds, co)
	if err != nil {
		return err
	}
	// A doorbell rung before CHANNEL_START: the device reads it not, and
	// the start puts it back at the head.
	bell := user[uapi.UserDoorbellOffset+abi.RegDoorbell:]
	binary.LittleEndian.PutUint64(bell, 1<<40)
	_, err = strangerCall(sock, &uapi.ChannelStart{Channel: co.Channel})
	fmt.Println(errnoLine("start populated", err))
	fence := binary.LittleEndian.Uint64(status[uapi.StatusPageOffset+abi.RegFence:])
	fmt.Printf("doorbell rung before the start: reset to the head: %v\n", binary.LittleEndian.Uint64(bell) == fence)
	_, err = strangerCall(sock, &uapi.ChannelStart{Channel: co.Channel})
	fmt.Println(errnoLine("start again", err))

	// Holes in a started channel's files, every way a stranger has: the
	// status memfd is read-only, so through a reopen of it as well.
	reopened, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fds[uapi.ChannelFDStatus]), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("reopen status: " + errnoName(err))
	}
	for _, f := range []struct {
		name string
		fd   int
	}{{"user", fds[uapi.ChannelFDUser]}, {"status reopened", reopened}} {
		if f.fd < 0 {
			continue
		}
		err := unix.Fallocate(f.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(co.UserSize))
		fmt.Printf("punch %s: %s\n", f.name, errnoName(err))
	}
	fmt.Printf("madvise remove user: %s\n", errnoName(unix.Madvise(user, unix.MADV_REMOVE)))
	_, err = unix.Mmap(fds[uapi.ChannelFDUser], 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	fmt.Printf("new writable mapping of user: %s\n", errnoName(err))
	fmt.Println("after the punches: " + holes(fds, co))

	_, err = strangerCall(sock, &uapi.ChannelStart{Channel: 4000})
	fmt.Println(errnoLine("start unknown", err))
	_, err = strangerCall(sock, &uapi.ChannelClose{Channel: co.Channel})
	fmt.Println(errnoLine("close", err))
	_, err = strangerCall(sock, &uapi.ChannelStart{Channel: co.Channel})
	fmt.Println(errnoLine("start closed", err))

	// A channel closed without being started, its files let go at once:
	// its quota comes back (linger.go), so a second one opens.
	for i := range 2 {
		unstarted := &uapi.ChannelOpen{Engine: uint32(abi.EngineCompute), Priority: uint32(abi.PriorityNormal)}
		fds, err := strangerCall(sock, unstarted)
		if err != nil {
			fmt.Println(errnoLine(fmt.Sprintf("open unstarted %d", i), err))
			break
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		_, err = strangerCall(sock, &uapi.ChannelClose{Channel: unstarted.Channel})
		fmt.Println(errnoLine(fmt.Sprintf("close unstarted %d", i), err))
	}
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotStartAChannelWhosePagesTheDaemonWouldAllocate: a
// stranger's CHANNEL_START of a channel whose memfds it has not
// populated is refused, and the daemon has allocated no page of them —
// at CHANNEL_OPEN or at the refusal; once started, neither file takes a
// hole, however the stranger asks; and what CHANNEL_START, CHANNEL_CLOSE
// and the doorbell do around that is what uapi.ChannelStart says.
func TestAStrangerCannotStartAChannelWhosePagesTheDaemonWouldAllocate(t *testing.T) {
	d := startDaemon(t, "-client-channels", "2")
	cred, _ := strangerCred()
	s := startStranger(t, "sh-start", d.node, "", cred)
	lines := s.findings(t)
	t.Logf("the stranger: %q", lines)
	want := []string{
		"opened: user all hole, status all hole",
		fmt.Sprintf("start unpopulated errno=%d", uapi.ErrInval),
		"after the refused start: user all hole, status all hole",
		"start populated ok",
		"doorbell rung before the start: reset to the head: true",
		fmt.Sprintf("start again errno=%d", uapi.ErrBusy),
		"punch user: EPERM",
		"punch status reopened: EPERM",
		"madvise remove user: EPERM",
		"new writable mapping of user: EPERM",
		"after the punches: user no hole, status no hole",
		fmt.Sprintf("start unknown errno=%d", uapi.ErrNoEntry),
		"close ok",
		fmt.Sprintf("start closed errno=%d", uapi.ErrNoEntry),
		"close unstarted 0 ok",
		"close unstarted 1 ok",
	}
	assert.Equal(t, want, lines, "what the stranger's calls met")
	d.live(t, "after the stranger")
	d.stop(t)
}

// spliceStartedChannels is the red team's splice loop as a client of
// 3.0 would run it: open a channel, populate it, start it, splice every
// page of both memfds into a pipe it keeps, close the memfds and the
// channel; arg cycles. It says how many cycles it made and how many bytes
// of allocated memfd pages its pipes hold, then "holding", and holds them
// until it is killed.
func spliceStartedChannels(node, arg string) error {
	cycles, _ := strconv.Atoi(arg)
	sock, err := attachedStranger(node)
	if err != nil {
		return err
	}
	var held int64
	startRefused := false
	i := 0
	for ; i < cycles; i++ {
		co := &uapi.ChannelOpen{Engine: uint32(i % abi.NumEngines), Priority: uint32(abi.PriorityNormal)}
		fds, err := strangerCall(sock, co)
		if err != nil {
			fmt.Println(errnoLine("open", err))
			break
		}
		user, status, err := populate(fds, co)
		if err != nil {
			return err
		}
		if _, err := strangerCall(sock, &uapi.ChannelStart{Channel: co.Channel}); err != nil && !startRefused {
			fmt.Println(errnoLine("start", err)) // a daemon before 3.0 has no CHANNEL_START: the splice goes on without it
			startRefused = true
		}
		unix.Munmap(user)
		unix.Munmap(status)
		for k, fd := range fds {
			size := int64(co.UserSize)
			if k == uapi.ChannelFDStatus {
				size = int64(co.StatusSize)
			}
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return err
			}
			off := int64(0)
			for off < size {
				m, err := unix.Splice(fd, &off, p[1], nil, int(size-off), unix.SPLICE_F_NONBLOCK)
				if err != nil || m <= 0 {
					break
				}
			}
			held += allocated(fd, off)
			unix.Close(p[1])
			unix.Close(fd) // p[0] is kept, and with it the pages
		}
		if _, err := strangerCall(sock, &uapi.ChannelClose{Channel: co.Channel}); err != nil {
			return err
		}
	}
	fmt.Printf("%d cycles, %d bytes held\n", i, held)
	fmt.Println("holding")
	select {} // the pipes' pages held until the test kills it
}

// memoryCgroup is a memory cgroup of the test's making, child of the
// test's own, with one process in it.
type memoryCgroup struct {
	dir   string
	usage string // the file that reads its memory use in bytes
}

// newMemoryCgroup makes a child of the test process's memory cgroup —
// cgroup v1's memory hierarchy, or cgroup2's with the memory controller
// enabled for children — or skips the test, saying why, where it cannot.
func newMemoryCgroup(t *testing.T) *memoryCgroup {
	t.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no memory cgroup to measure the daemon in: %v", err)
	}
	var v1, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1 = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		case parts[0] == "0" && parts[1] == "":
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		}
	}
	name := fmt.Sprintf("softgpu-splicehole-%d", os.Getpid())
	for _, c := range []memoryCgroup{{v1, "memory.usage_in_bytes"}, {v2, "memory.current"}} {
		if c.dir == "" {
			continue
		}
		c.dir = filepath.Join(c.dir, name)
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(c.dir, c.usage)); err != nil { // cgroup2 without the memory controller for children
			os.Remove(c.dir)
			continue
		}
		t.Cleanup(func() {
			// Its processes have exited by now (the daemon's cleanup ran
			// first); a cgroup v1 rmdir gives what it still charges to
			// its parent.
			for range 50 {
				if os.Remove(c.dir) == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		return &c
	}
	t.Skip("no memory cgroup the test may make a child of (cgroup v1's memory hierarchy, or cgroup2 with the memory controller for children), so the daemon's memory cannot be told from the stranger's; TestAStrangerCannotStartAChannelWhosePagesTheDaemonWouldAllocate carries the argument")
	return nil
}

// join moves process pid into the cgroup: its allocations from then on
// are charged there.
func (c *memoryCgroup) join(t *testing.T, pid int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644))
}

// used returns the cgroup's memory use, in bytes: what its processes
// allocated and still hold, or what others hold of it — a page the
// daemon allocated in a memfd stays charged to the daemon's cgroup while
// a pipe holds it, the memfd gone. (Not its memory.stat's shmem: that
// counts a memfd's pages while they are the file's, and not once the
// file has gone and a pipe alone holds them.)
func (c *memoryCgroup) used(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, c.usage))
	require.NoError(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	return n
}

// spliceCycles is how many channels the splicing stranger goes through:
// on a daemon that allocated a channel's pages, enough that what its
// pipes hold stands far above spliceMargin.
const spliceCycles = 2000

// spliceMargin is how much the daemon's memory cgroup may grow while
// the stranger splices and holds: the daemon's own churn of spliceCycles
// channel opens and closes (Go heap, inotify watches, page tables) and
// nothing of the channels' pages, where a daemon that allocated them
// grows by three of their pages a cycle, spliceCycles times over, on
// top. The stranger's count of the bytes it holds is checked to be well
// above the margin, so the test can fail.
const spliceMargin = 12 << 20

// spliceBound is how long the splicing stranger may take to say it
// holds its pipes: its spliceCycles cycles of four calls each take
// seconds alone, and several times that while the rest of the package
// runs beside it on two cores; the bound is a hang, not a speed.
const spliceBound = 2 * time.Minute

// untilWithin is until with a bound of its own, for a stranger whose
// work before last takes longer than patience.
func (s *stranger) untilWithin(t *testing.T, last string, bound time.Duration) []string {
	t.Helper()
	var got []string
	timeout := time.After(bound)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				err := s.cmd.Wait()
				t.Fatalf("stranger %d ended (%v) without %q; it said %q: %s", s.cmd.Process.Pid, err, last, got, s.stderr.String())
			}
			if line == last {
				return got
			}
			got = append(got, line)
		case <-timeout:
			t.Fatalf("stranger %d said %q and not %q within %v", s.cmd.Process.Pid, got, last, bound)
		}
	}
}

// TestAStrangerCannotKeepTheDaemonsPagesInPipes: the red team's splice
// loop, as a 3.0 client runs it (populate, start, splice, close),
// against a daemon in a memory cgroup of its own: what the stranger's
// pipes hold is memory its own process allocated, so the daemon's cgroup
// does not grow by it.
func TestAStrangerCannotKeepTheDaemonsPagesInPipes(t *testing.T) {
	cg := newMemoryCgroup(t)
	d := startDaemon(t, "-client-channels", "8", "-uid-channels", "8")
	cg.join(t, d.cmd.Process.Pid)
	d.live(t, "in its memory cgroup") // its first allocations after the move
	before := cg.used(t)
	cred, _ := strangerCred()
	s := startStranger(t, "sh-splice", d.node, strconv.Itoa(spliceCycles), cred)
	lines := s.untilWithin(t, "holding", spliceBound)
	t.Logf("the stranger: %q", lines)
	var cycles int
	var held int64
	_, err := fmt.Sscanf(lines[len(lines)-1], "%d cycles, %d bytes held", &cycles, &held)
	require.NoError(t, err)
	require.Equal(t, spliceCycles, cycles, "the stranger's cycles of open, populate, start, splice and close")
	require.Greater(t, held, int64(2*spliceMargin), "bytes of memfd pages the stranger's pipes hold: too few for the test to tell them from the daemon's own growth")
	grew := cg.used(t) - before
	t.Logf("while the stranger held %d KiB of its channels' pages in pipes, the daemon's memory cgroup grew by %d KiB", held>>10, grew>>10)
	assert.Less(t, grew, int64(spliceMargin), "growth of the daemon's memory cgroup, in bytes, while the stranger holds %d bytes of channel pages in pipes", held)
	s.kill()
	d.live(t, "after the stranger")
	d.stop(t)
}
