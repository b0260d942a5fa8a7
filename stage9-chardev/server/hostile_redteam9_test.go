package server_test

// Red-team findings against stage 9 (2026-12-06), each a stranger
// process of its own against the real softgpud, in the harness of
// stranger_test.go. Each test FAILS on the code it was written against;
// the standalone clients and scripts in ../attack/ reproduce the same.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["rt-delays"] = rtDelays
	strangerRoles["rt-window"] = rtWindow
	strangerRoles["rt-live"] = rtLive
	strangerRoles["rt-inflightlive"] = rtInflightLive
	strangerRoles["rt-linger"] = rtLinger
	strangerRoles["rt-lingermany"] = rtLingerMany
	strangerRoles["rt-lingerqueued"] = rtLingerQueued
	strangerRoles["rt-spins"] = rtSpins
	strangerRoles["rt-splice"] = rtSplice
}

// rtQueueDelays queues n DELAYs of 1.5 s on each engine: each ends well
// inside the default 2 s watchdog, so nothing is faulted.
func rtQueueDelays(g *client.GPU, n int) error {
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := g.NewBatch(e)
		for range n {
			b.Delay(1_500_000_000)
		}
		if _, err := b.Submit(); err != nil {
			return err
		}
	}
	return nil
}

// rtDelays: a stranger that allocates nothing; it only keeps DELAYs
// queued on its own two channels, and holds until its stdin line.
func rtDelays(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	if err := rtQueueDelays(g, 100); err != nil {
		return err
	}
	fmt.Println("ready")
	return waitLine()
}

// TestAStrangersQueuedWorkDoesNotHoldAnothersFreedMemory: a victim that
// allocates and frees one 1 MiB buffer again and again, well inside its
// quota, must keep getting it while a stranger's channels have work
// queued. On the code at hand a FREE is deferred until every channel on
// the device has passed what was queued before it (driver/context.go,
// unmap: c.d.queuedWork()), the stranger's too, although the stranger's
// commands cannot name the victim's context: the victim's 13th ALLOC on
// a 16 MiB device fails with ErrNoMemory.
func TestAStrangersQueuedWorkDoesNotHoldAnothersFreedMemory(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-delays", d.node, "", cred)
	s.until(t, "ready")
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	for i := range 50 {
		p, err := g.Alloc(1 << 20)
		require.NoError(t, err, "the victim's ALLOC %d of 1 MiB (each freed before the next), a stranger's DELAYs queued", i+1)
		require.NoError(t, g.Free(p))
	}
	s.kill()
	d.stop(t)
}

// rtWindow: DELAYs queued, then HOST_REGISTER and HOST_UNREGISTER of a
// page until refused; it says how many it freed, and holds.
func rtWindow(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	if err := rtQueueDelays(g, 100); err != nil {
		return err
	}
	n := 0
	for ; n < 200; n++ {
		h, err := g.HostAlloc(4096)
		if err != nil {
			break
		}
		if err := g.HostFree(h); err != nil {
			return err
		}
	}
	fmt.Printf("freed %d\n", n)
	fmt.Println("ready")
	return waitLine()
}

// TestAStrangerCannotTakeTheWholeWindowByFreeingBehindItsWork: the
// window quota (by default half the device's entries) must bound what a
// stranger holds. HOST_UNREGISTER refunds the entry at once
// (server/client.go, hostUnregister), but the entry retires only once
// the stranger's own channels pass the work queued before the free; so
// a stranger with DELAYs queued registers and frees until the window is
// empty, and a victim's HOST_REGISTER fails (ErrNoMemory).
func TestAStrangerCannotTakeTheWholeWindowByFreeingBehindItsWork(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-window", d.node, "", cred)
	got := s.until(t, "ready")
	t.Logf("stranger: %q", got)
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	defer g.Close()
	h, err := g.HostAlloc(4096)
	require.NoError(t, err, "the victim's HOST_REGISTER after a stranger freed behind its queued DELAYs (%q)", got)
	g.HostFree(h)
	s.kill()
	d.stop(t)
}

// rtLive: MANAGED_PAGER with the liveness socket its argument names —
// "self", the client's own end of its connection to the node; "tcp", a
// TCP socket lingering with data its peer never reads — and it says
// whether the call was refused.
func rtLive(node, arg string) error {
	live := map[string]func(self int) (int, error){
		"self": func(self int) (int, error) { return self, nil },
		"tcp":  func(int) (int, error) { return lingeringTCP() },
	}[arg]
	if live == nil {
		return fmt.Errorf("rt-live: no liveness socket %q", arg)
	}
	err := rtPager(node, live)
	switch {
	case errors.Is(err, uapi.ErrInval):
		fmt.Println("refused " + uapi.ErrInval.Error())
	case err != nil:
		return err
	default:
		fmt.Println("taken")
	}
	fmt.Println("done")
	return nil
}

// rtInflightLive: MANAGED_PAGER with one end of a fresh socket pair as
// the liveness socket, as the client library gives — but with the
// client's own end of its connection to the node sent into that end
// first, so that the daemon, holding the liveness socket, holds the
// connection's end too; then it exits.
func rtInflightLive(node, _ string) error {
	err := rtPager(node, func(self int) (int, error) {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		if err := unix.Sendmsg(pair[1], []byte{0}, unix.UnixRights(self), nil, 0); err != nil {
			return -1, err
		}
		return pair[0], nil
	})
	if err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

// rtPager makes a managed allocation with a pager, giving MANAGED_PAGER
// the liveness socket live returns (self: the client's end of its
// connection).
func rtPager(node string, live func(self int) (int, error)) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	var self int
	raw, _ := sock.SyscallConn()
	raw.Control(func(fd uintptr) { self = int(fd) })
	seq := uint64(0)
	call := func(arg uapi.Arg, fds ...int) error {
		seq++
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), oob, nil); err != nil {
			return err
		}
		buf := make([]byte, uapi.MaxMessage+1)
		rob := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
		n, oobn, _, _, err := sock.ReadMsgUnix(buf, rob)
		if err != nil {
			return err
		}
		got := uapi.ReceivedFDs(rob[:oobn])
		h, err := uapi.DecodeReply(buf[:n], len(got), arg)
		if err == nil && h.Errno != uapi.OK {
			err = h.Errno
		}
		return err
	}
	if err := call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		return err
	}
	if err := call(&uapi.Attach{}); err != nil {
		return err
	}
	const size = 64 << 10
	memfd, err := unix.MemfdCreate("rt", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return err
	}
	unix.Ftruncate(memfd, size)
	unix.FcntlInt(uintptr(memfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	ma := &uapi.ManagedAlloc{Size: size, Length: size}
	if err := call(ma, memfd); err != nil {
		return fmt.Errorf("MANAGED_ALLOC: %w", err)
	}
	mapping, err := unix.Mmap(memfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	flags := uint64(0)
	ufd, err := uffd.Open(0, uffd.FeatureWPShmem)
	if errors.Is(err, unix.EPERM) {
		flags = uapi.PagerUserModeOnly
		ufd, err = uffd.Open(uffd.UserModeOnly, uffd.FeatureWPShmem)
	}
	if err != nil {
		return err
	}
	base := uffd.Address(mapping)
	if err := uffd.Register(ufd, base, size, uffd.ModeMissing|uffd.ModeWP); err != nil {
		return err
	}
	lfd, err := live(self)
	if err != nil {
		return err
	}
	if err := call(&uapi.ManagedPager{VA: ma.VA, Base: base, Length: size, Flags: flags}, ufd, lfd); err != nil {
		return fmt.Errorf("MANAGED_PAGER: %w", err)
	}
	return nil
}

// TestAClientThatExitsIsTornDownWhateverItsLivenessSocket: a client's
// exit must end it on the daemon, whatever else holds its end of the
// connection. MANAGED_PAGER keeps the liveness socket until the pager
// stops, at MANAGED_FREE or teardown; a stranger that first sends its own
// end of its connection into that socket leaves it in flight there, so
// the daemon holds both ends and its exit never reads as EOF. The daemon
// watches the process itself (exitwatch.go) and tears it down.
func TestAClientThatExitsIsTornDownWhateverItsLivenessSocket(t *testing.T) {
	d := startDaemon(t)
	ctl := control(t, d.node)
	before := clientCount(t, ctl)
	cred, _ := strangerCred()
	startStranger(t, "rt-inflightlive", d.node, "", cred).findings(t) // it has exited
	waitClients(t, ctl, before)
	d.live(t, "a stranger gone with its connection in flight in its liveness socket")
	d.stop(t)
}

// TestAPagersLivenessSocketIsOneEndOfASocketPair: the daemon closes the
// liveness socket MANAGED_PAGER keeps when the pager stops, and holds it
// until then. The call refuses, with ErrInval, a TCP socket (whose close
// can wait for its linger time) and the client's own end of its
// connection (which, held, would keep the connection open after the
// client's exit).
func TestAPagersLivenessSocketIsOneEndOfASocketPair(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	for _, live := range []string{"tcp", "self"} {
		got := startStranger(t, "rt-live", d.node, live, cred).findings(t)
		assert.Equal(t, []string{"refused " + uapi.ErrInval.Error()}, got, "MANAGED_PAGER with liveness socket %q", live)
	}
	d.live(t, "strangers that offered a TCP socket and their own connection for liveness")
	d.stop(t)
}

// rtLinger: sends, with a call, a TCP socket whose close(2) blocks
// (SO_LINGER on, data queued its peer never reads), dropping its own
// copy first, so the daemon's close is the last; then holds.
func rtLinger(node, _ string) error {
	fd, err := lingeringTCP()
	if err != nil {
		return err
	}
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	// Calls queued ahead keep the daemon busy, so that this close comes
	// before the daemon's.
	for k := range 64 {
		sock.WriteMsgUnix(uapi.EncodeCall(uint64(k+1), &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}), nil, nil)
	}
	sock.WriteMsgUnix(uapi.EncodeCall(100, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}), unix.UnixRights(fd), nil)
	unix.Close(fd)
	fmt.Println("ready")
	return waitLine()
}

// rtLingerMany: sends lingering TCP sockets, one with each of a dozen
// VERSION calls, and says how many of those calls were answered before
// the daemon hung up. Each goes behind 64 plain calls, so that the
// stranger's close of its own copy comes before the daemon's.
func rtLingerMany(node, _ string) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	version := &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	answered, seq := 0, uint64(0)
	buf := make([]byte, uapi.MaxMessage+1)
	for range 12 {
		fd, err := lingeringTCP()
		if err != nil {
			return err
		}
		for range 64 {
			seq++
			sock.WriteMsgUnix(uapi.EncodeCall(seq, version), nil, nil)
		}
		seq++
		_, _, werr := sock.WriteMsgUnix(uapi.EncodeCall(seq, version), unix.UnixRights(fd), nil)
		go unix.Close(fd) // if the daemon's close came first, this one waits, on a thread of its own
		if werr != nil {
			break
		}
		got := 0
		for ; got < 65; got++ {
			if n, _, _, _, err := sock.ReadMsgUnix(buf, nil); err != nil || n == 0 {
				break
			}
		}
		if got < 65 {
			break
		}
		answered++
	}
	fmt.Printf("answered %d\n", answered)
	if answered < 12 {
		fmt.Println("hung up")
	}
	fmt.Println("done")
	return nil
}

// TestAClientWhoseDescriptorsWaitToCloseIsDropped: each descriptor a
// client sent whose close waits holds a thread of the daemon's, so a
// client may keep maxDiscarding of them closing; the message that brings
// one more is answered, and the client is dropped. The daemon goes on
// serving others and stops at SIGTERM with those closes still waiting.
func TestAClientWhoseDescriptorsWaitToCloseIsDropped(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	got := startStranger(t, "rt-lingermany", d.node, "", cred).findings(t)
	// Nine if every one of the daemon's closes waited; more if the
	// stranger's own close of a copy came last now and then (the 64 calls
	// ahead of each make that rare), so that the daemon's returned.
	require.Len(t, got, 2, "the stranger's findings: %q", got)
	assert.Equal(t, "hung up", got[1], "a client sending a dozen lingering sockets (maxDiscarding is 8): %q", got)
	var answered int
	fmt.Sscanf(got[0], "answered %d", &answered)
	assert.GreaterOrEqual(t, answered, maxDiscardingTest+1, "calls answered, each carrying a lingering socket, before the hang-up")
	d.live(t, "a stranger dropped with nine closes waiting")
	d.stop(t)
}

// rtLingerQueued: it stops reading, then makes a VERSION call and a
// second one carrying a lingering TCP socket, its own copy closed: the
// daemon's answer to the first fails, and the daemon hangs up with the
// second still queued.
func rtLingerQueued(node, _ string) error {
	fd, err := lingeringTCP()
	if err != nil {
		return err
	}
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	raw, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	raw.Control(func(s uintptr) { unix.Shutdown(int(s), unix.SHUT_RD) }) // the daemon's first answer fails
	version := &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(1, version), nil, nil); err != nil {
		return err
	}
	if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(2, version), unix.UnixRights(fd), nil); err != nil {
		return err
	}
	go unix.Close(fd) // if the message was read or freed first, this close is the last, and waits: on a thread of its own
	fmt.Println("ready")
	return waitLine()
}

// TestSIGTERMStopsTheDaemonThatHungUpOnALingeringSocket: closing a
// connection frees the messages still queued in it, and closes the
// descriptors they carry on the same thread. A stranger that stops
// reading is dropped when an answer fails, with a message that carries a
// lingering TCP socket still queued; the daemon must go on serving, and
// stop at SIGTERM.
func TestSIGTERMStopsTheDaemonThatHungUpOnALingeringSocket(t *testing.T) {
	cred, _ := strangerCred()
	d := startDaemon(t)
	s := startStranger(t, "rt-lingerqueued", d.node, "", cred)
	s.until(t, "ready")
	time.Sleep(500 * time.Millisecond) // the daemon answers, hangs up, and lets the connection go
	d.live(t, "a stranger hung up on with a lingering socket queued")
	d.stop(t)
}

// lingeringTCP returns a connected TCP socket whose close(2) waits: its
// send queue is full, its peer (kept open, never read, for as long as
// the stranger lives) takes nothing, and SO_LINGER is on for an hour.
func lingeringTCP() (int, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return -1, err
	}
	lraw, _ := ln.SyscallConn()
	lraw.Control(func(pfd uintptr) { unix.SetsockoptInt(int(pfd), unix.SOL_SOCKET, unix.SO_RCVBUF, 2048) })
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	port := ln.Addr().(*net.TCPAddr).Port
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return -1, err
	}
	peer, err := ln.AcceptTCP()
	if err != nil {
		return -1, err
	}
	lingering = append(lingering, peer) // held, never read, until the stranger ends
	unix.SetNonblock(fd, true)
	buf := make([]byte, 65536)
	for quiet := 0; quiet < 20; {
		if _, err := unix.Write(fd, buf); err != nil {
			quiet++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		quiet = 0
	}
	unix.SetNonblock(fd, false)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 3600}); err != nil {
		return -1, err
	}
	return fd, nil
}

// maxDiscardingTest is the daemon's maxDiscarding (server/discard.go),
// which this external test package cannot see.
const maxDiscardingTest = 8

// lingering keeps the peers of lingeringTCP's sockets open.
var lingering []*net.TCPConn

// TestSIGTERMStopsTheDaemonHoldingAClientsLingeringSocket: SIGTERM must
// stop softgpud with status 0 in every state, including while it closes
// a descriptor a client sent it. serve closes every descriptor a message
// brought (server/client.go) on the client's goroutine, and close(2) of
// a lingering TCP socket waits up to its linger time; Close then waits
// for that goroutine, and softgpud exits 1 at its 10 s bound.
func TestSIGTERMStopsTheDaemonHoldingAClientsLingeringSocket(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-linger", d.node, "", cred)
	s.until(t, "ready")
	time.Sleep(500 * time.Millisecond) // the daemon reaches the call that carries the socket
	t.Logf("daemon threads in wait_woken: %d", threadsIn(d.cmd.Process.Pid, "wait_woken"))
	d.live(t, "a stranger's lingering socket being closed")
	d.stop(t)
}

// threadsIn counts the threads of pid asleep in the kernel function
// wchan.
func threadsIn(pid int, wchan string) int {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	n := 0
	for _, task := range tasks {
		w, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/wchan")
		if strings.TrimSpace(string(w)) == wchan {
			n++
		}
	}
	return n
}

// rtSpins: for 20 s, again and again, a fresh context whose two channels
// each run a SPIN of 2^62 cycles (no preemption point); each round lasts
// until the watchdog has reset both engines (about 4 s).
func rtSpins(node, _ string) error {
	end := time.Now().Add(20 * time.Second)
	first := true
	for time.Now().Before(end) {
		if err := rtSpinRound(node, func() {
			if first {
				fmt.Println("ready")
				first = false
			}
		}); err != nil {
			fmt.Fprintln(os.Stderr, "round:", err)
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func rtSpinRound(node string, spinning func()) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	defer sock.Close()
	seq := uint64(0)
	call := func(arg uapi.Arg) ([]int, error) {
		seq++
		sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), nil, nil)
		buf := make([]byte, 512)
		oob := make([]byte, 512)
		n, oobn, _, _, err := sock.ReadMsgUnix(buf, oob)
		if err != nil {
			return nil, err
		}
		fds := uapi.ReceivedFDs(oob[:oobn])
		_, err = uapi.DecodeReply(buf[:n], len(fds), arg)
		return fds, err
	}
	if _, err := call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		return err
	}
	att := &uapi.Attach{}
	if _, err := call(att); err != nil {
		return err
	}
	var done []func() bool
	for e := uint32(0); e < 2; e++ {
		co := &uapi.ChannelOpen{Engine: e}
		fds, err := call(co)
		if err != nil {
			return err
		}
		user, err := unix.Mmap(fds[uapi.ChannelFDUser], 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		status, err := unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(co.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return err
		}
		mask := uint64(co.RingSize) - 1
		head := word(user, abi.RegDoorbell).Load()
		cmd := abi.Command{Op: abi.OpSpin, Ctx: abi.Context(att.Context), Value: 1 << 62, Seq: head}
		cmd.Encode(user[uapi.UserRingOffset+abi.SlotOffset(head, mask):][:abi.CommandSize])
		word(user, abi.RegDoorbell).Store(head + 1)
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&user[abi.RegDoorbell])), 1, 1<<30, 0, 0, 0)
		w := uapi.StatusCompletionsOffset + 8*abi.CompletionWord(head, mask)
		done = append(done, func() bool { return abi.Completed(word(status, w+8*uapi.CompletionIndexWord).Load(), head) })
	}
	spinning()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if done[0]() && done[1]() {
			return nil
		}
	}
	return nil
}

// TestAStrangerCannotHoldBothEnginesWithSpins: a stranger holding no
// quota but a context and two channels at a time runs a SPIN (no
// preemption point) on each engine, and again on a fresh context each
// time the watchdog has reset the engines. The watchdog asks a command to
// stop at 2 s and resets its engine a limit later (device/watchdog.go,
// watchScan), so each round holds both engines about 4 s, and nothing
// stops the stranger starting the next: a well-behaved client's life on
// the daemon takes up to 4 s, past liveBound.
func TestAStrangerCannotHoldBothEnginesWithSpins(t *testing.T) {
	d := startDaemon(t)
	cred, _ := strangerCred()
	s := startStranger(t, "rt-spins", d.node, "", cred)
	s.until(t, "ready")
	for i := range 3 {
		d.live(t, fmt.Sprintf("probe %d, a stranger's SPINs on both engines", i))
	}
	s.kill()
	d.stop(t)
}

// rtSplice: opens and closes a channel arg times, keeping no memfd and no
// mapping, but splicing each memfd's pages into a pipe it keeps; it says
// how many cycles it made and how many bytes of allocated memfd pages
// its pipes hold.
func rtSplice(node, arg string) error {
	cycles, _ := strconv.Atoi(arg)
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	if _, err := strangerCall(sock, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		return err
	}
	if _, err := strangerCall(sock, &uapi.Attach{}); err != nil {
		return err
	}
	var held int64
	i := 0
	for ; i < cycles; i++ {
		co := &uapi.ChannelOpen{Engine: uint32(i % 2)}
		fds, err := strangerCall(sock, co)
		if err != nil {
			fmt.Println(errnoLine("open", err))
			break
		}
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
			for o := int64(0); o < off; {
				d, err := unix.Seek(fd, o, unix.SEEK_DATA)
				if err != nil || d >= off {
					break
				}
				h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
				if err != nil {
					break
				}
				held += min(h, off) - d
				o = h
			}
			unix.Close(p[1])
			unix.Close(fd) // p[0] is kept, and with it the pages
		}
		if _, err := strangerCall(sock, &uapi.ChannelClose{Channel: co.Channel}); err != nil {
			return err
		}
	}
	fmt.Printf("%d cycles, %d bytes held\n", i, held)
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotKeepClosedChannelsPagesInPipes: the Channels quota
// counts a closed channel until its memfds are gone (server/linger.go),
// so that a stranger cannot hold the daemon's pages of channels it has
// closed. But the kernel's word that a memfd is gone (IN_IGNORED) is not
// that its pages are: splice(2) puts references to them in a pipe, which
// keeps them after the last descriptor and mapping. With a quota of 8
// channels a stranger closes and reopens far past 8, holding every
// channel's pages.
func TestAStrangerCannotKeepClosedChannelsPagesInPipes(t *testing.T) {
	d := startDaemon(t, "-client-channels", "8", "-uid-channels", "8")
	cred, _ := strangerCred()
	s := startStranger(t, "rt-splice", d.node, "400", cred)
	lines := s.findings(t)
	t.Logf("the stranger: %q", lines)
	var cycles int
	var held int64
	_, err := fmt.Sscanf(lines[len(lines)-1], "%d cycles, %d bytes held", &cycles, &held)
	require.NoError(t, err)
	assert.LessOrEqual(t, cycles, 8+8, "cycles of open/splice/close within a quota of 8 channels (holding %d KiB of the daemon's pages)", held>>10)
	d.live(t, "after the stranger")
	d.stop(t)
}

var _ = exec.Command
var _ = assert.Equal
