package server_test

// Descriptors whose close waits: a client's lingering TCP socket, sent in
// a message or left queued in its connection, must hold up neither its
// serve loop nor SIGTERM (discard.go).

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["rt-linger"] = rtLinger
	strangerRoles["rt-lingermany"] = rtLingerMany
	strangerRoles["rt-lingerqueued"] = rtLingerQueued
}

// rtLinger: sends, with a call, a TCP socket whose close(2) blocks
// (SO_LINGER on, data queued its peer never reads), dropping its own
// copy first, so the daemon's close is the last; then holds.
func rtLinger(node, _ string) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	version := &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	// Calls queued ahead keep the daemon busy, so that this close comes
	// before the daemon's. That is a race a loaded machine can lose (a
	// race-built stranger is slow): then this close is the last, and
	// waits, and the daemon's did not. So the close runs on a goroutine,
	// and a close that has not come back at once was the last: the
	// stranger tries again with a fresh socket, as rtLingerMany counts.
	seq := uint64(0)
	for tries := 0; tries < 20; tries++ {
		first, werr, err := sendLingering(sock, version, &seq, 500*time.Millisecond)
		if err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		if first { // not the last: the daemon's close is
			fmt.Println("ready")
			return waitLine()
		}
	}
	return fmt.Errorf("the daemon closed its copy of the socket before this one in 20 tries")
}

// sendLingering queues 64 calls, then one more carrying a fresh lingering
// TCP socket (lingeringTCP), and closes the stranger's own copy on a
// goroutine: first reports whether that close came back within wait — so
// that it was not the last, and the daemon's close is the one that waits.
// seq is the last call's number, advanced; werr is the error of the write
// that carried the socket (the daemon may have hung up).
func sendLingering(sock *net.UnixConn, call uapi.Arg, seq *uint64, wait time.Duration) (first bool, werr, err error) {
	fd, err := lingeringTCP()
	if err != nil {
		return false, nil, err
	}
	for range 64 {
		*seq++
		sock.WriteMsgUnix(uapi.EncodeCall(*seq, call), nil, nil)
	}
	*seq++
	_, _, werr = sock.WriteMsgUnix(uapi.EncodeCall(*seq, call), unix.UnixRights(fd), nil)
	closed := make(chan struct{})
	go func() { unix.Close(fd); close(closed) }()
	select {
	case <-closed:
		return true, werr, nil
	case <-time.After(wait):
		return false, werr, nil
	}
}

// rtLingerMany: sends lingering TCP sockets, each with a VERSION call
// behind 64 plain ones, until a dozen of the daemon's copies are its
// last, and says how many of those calls were answered before the
// daemon hung up. Whose close of a socket comes last is a race: the
// stranger's own close runs while the daemon works through the calls
// ahead, and a close that comes back at once was not the last (the last
// waits), so only those sockets count.
func rtLingerMany(node, _ string) error {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	version := &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	answered, counted, seq := 0, 0, uint64(0)
	buf := make([]byte, uapi.MaxMessage+1)
	hungUp := false
	for tries := 0; counted < 12 && tries < 40 && !hungUp; tries++ {
		mine, werr, err := sendLingering(sock, version, &seq, 200*time.Millisecond) // mine: the daemon's close is the last
		if err != nil {
			return err
		}
		if werr != nil {
			hungUp = true
			break
		}
		got := 0
		for ; got < 65; got++ {
			if n, _, _, _, err := sock.ReadMsgUnix(buf, nil); err != nil || n == 0 {
				break
			}
		}
		if got < 65 {
			hungUp = true
			break
		}
		if mine {
			counted++
			answered++
		}
	}
	fmt.Printf("answered %d\n", answered)
	if hungUp {
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
	assert.Equal(t, []string{fmt.Sprintf("answered %d", maxDiscardingTest+1), "hung up"}, got,
		"calls answered, each carrying a lingering socket whose last close was the daemon's, before it hung up")
	d.live(t, "a stranger dropped with nine closes waiting")
	d.stop(t)
}

// rtLingerQueued: 64 VERSION calls, then one carrying a lingering TCP
// socket, its own copy closed; then it stops reading, so that an answer
// fails and the daemon hangs up with the call that carries the socket
// still queued.
func rtLingerQueued(node, _ string) error {
	fd, err := lingeringTCP()
	if err != nil {
		return err
	}
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return err
	}
	// 64 calls, then the one with the socket, queued faster than the
	// daemon answers them; then this end stops reading, and the next
	// answer the daemon sends fails.
	version := &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}
	for k := range 64 {
		if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(uint64(k+1), version), nil, nil); err != nil {
			return err
		}
	}
	if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(100, version), unix.UnixRights(fd), nil); err != nil {
		return err
	}
	raw, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	raw.Control(func(s uintptr) { unix.Shutdown(int(s), unix.SHUT_RD) })
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
	for quiet := 0; quiet < 5; {
		if _, err := unix.Write(fd, buf); err != nil {
			quiet++
			time.Sleep(2 * time.Millisecond)
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
// a descriptor a client sent it. close(2) of a lingering TCP socket
// waits up to its linger time; when serve closed every descriptor a
// message brought on the client's goroutine, Close waited for that
// goroutine and softgpud exited 1 at its 10 s bound. discard.go closes it
// on a goroutine nothing waits for.
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
