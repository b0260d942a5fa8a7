// Attack: random calls with random descriptors of every kind, on many
// connections, some attached and some not, some dying mid-call.
//
// Each message is a valid request number (or a random one) with a
// payload of random bytes biased toward small and boundary values, and
// 0-4 descriptors drawn from: sealed and unsealed memfds of odd sizes,
// pipes, eventfds, sockets (including the connection itself), a
// userfaultfd, /dev/null, a directory, the channel memfds the daemon
// handed out. It prints what it saw; the harness checks the daemon.
//
// usage: callfuzz -node PATH [-d DURATION] [-seed N]
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/internal/uffd"
	"softgpu/stage9-chardev/uapi"
)

var rnd *rand.Rand

func word() uint64 {
	switch rnd.Intn(10) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return ^uint64(0)
	case 3:
		return 1 << uint(rnd.Intn(64))
	case 4:
		return uint64(4096 * rnd.Intn(512))
	case 5:
		return uint64(rnd.Intn(256))
	case 6:
		return (1 << 40) + uint64(4096*rnd.Intn(8))
	case 7:
		return uint64(1<<63) - uint64(rnd.Intn(4096))
	default:
		return rnd.Uint64()
	}
}

var vas []uint64 // VAs and ids the daemon returned, to reuse

func payload(size int) []byte {
	b := make([]byte, size)
	for off := 0; off+8 <= size; off += 8 {
		v := word()
		if len(vas) > 0 && rnd.Intn(3) == 0 {
			v = vas[rnd.Intn(len(vas))]
		}
		if rnd.Intn(3) == 0 {
			v = 0
		}
		binary.LittleEndian.PutUint64(b[off:], v)
	}
	return b
}

func memfd(size int64, seals int) int {
	fd, err := unix.MemfdCreate("fz", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1
	}
	unix.Ftruncate(fd, size)
	if seals != 0 {
		unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
	}
	return fd
}

var handed []int // descriptors the daemon gave us

func someFD(self int) (fd int, own bool) {
	switch rnd.Intn(12) {
	case 0:
		return memfd(int64(4096*rnd.Intn(64)), unix.F_SEAL_SHRINK), true
	case 1:
		return memfd(int64(rnd.Intn(1<<20)), unix.F_SEAL_SHRINK|unix.F_SEAL_GROW), true
	case 2:
		return memfd(1<<20, 0), true
	case 3:
		var p [2]int
		unix.Pipe2(p[:], unix.O_CLOEXEC)
		unix.Close(p[1])
		return p[0], true
	case 4:
		fd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
		return fd, true
	case 5:
		fds, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		unix.Close(fds[1])
		return fds[0], true
	case 6:
		return self, false
	case 7:
		fd, err := uffd.Open(uffd.UserModeOnly, 0)
		if err != nil {
			fd, _ = uffd.Open(0, 0)
		}
		return fd, true
	case 8:
		fd, _ := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		return fd, true
	case 9:
		fd, _ := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, true
	case 10:
		if len(handed) > 0 {
			return handed[rnd.Intn(len(handed))], false
		}
		return memfd(8192, unix.F_SEAL_SHRINK), true
	default:
		return memfd(int64(4096*(1+rnd.Intn(16))), unix.F_SEAL_SHRINK), true
	}
}

func session(node string, deadline time.Time, stats map[string]int) {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		stats["dial error"]++
		time.Sleep(10 * time.Millisecond)
		return
	}
	defer sock.Close()
	var self int
	raw, _ := sock.SyscallConn()
	raw.Control(func(fd uintptr) { self = int(fd) })
	buf := make([]byte, 4096)
	oob := make([]byte, 4096)
	seq := uint64(0)
	send := func(msg []byte, fds []int) bool {
		var o []byte
		if len(fds) > 0 {
			o = unix.UnixRights(fds...)
		}
		_, _, err := sock.WriteMsgUnix(msg, o, nil)
		return err == nil
	}
	recv := func() (uapi.Header, bool) {
		sock.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, oobn, _, _, err := sock.ReadMsgUnix(buf, oob)
		if err != nil || n < uapi.HeaderSize {
			if err != nil {
				stats["read: "+fmt.Sprint(err)[:min(40, len(fmt.Sprint(err)))]]++
			}
			return uapi.Header{}, false
		}
		for _, fd := range uapi.ReceivedFDs(oob[:oobn]) {
			if len(handed) < 64 {
				handed = append(handed, fd)
			} else {
				unix.Close(fd)
			}
		}
		h := uapi.DecodeHeader(buf[:n])
		if n >= uapi.HeaderSize+8 && h.Errno == 0 {
			for off := uapi.HeaderSize; off+8 <= n; off += 8 {
				if v := binary.LittleEndian.Uint64(buf[off:]); v != 0 && len(vas) < 256 {
					vas = append(vas, v)
				}
			}
		}
		return h, true
	}
	// Usually negotiate and attach first.
	if rnd.Intn(5) != 0 {
		seq++
		send(uapi.EncodeCall(seq, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}), nil)
		recv()
		if rnd.Intn(4) != 0 {
			seq++
			send(uapi.EncodeCall(seq, &uapi.Attach{}), nil)
			recv()
		}
	}
	calls := rnd.Intn(200)
	for i := 0; i < calls && time.Now().Before(deadline); i++ {
		var msg []byte
		c := &uapi.Calls[rnd.Intn(len(uapi.Calls))]
		req := c.Request
		size := c.CallSize()
		switch rnd.Intn(20) {
		case 0:
			req = uint32(rnd.Uint64())
		case 1:
			size = rnd.Intn(uapi.MaxMessage + 8)
		}
		msg = make([]byte, uapi.HeaderSize)
		seq++
		uapi.Header{Request: req, Seq: seq}.Encode(msg)
		msg = append(msg, payload(size)...)
		if rnd.Intn(30) == 0 {
			msg = msg[:rnd.Intn(len(msg)+1)]
		}
		nfds := c.FDsIn
		if rnd.Intn(6) == 0 {
			nfds = rnd.Intn(5)
		}
		var fds, mine []int
		for j := 0; j < nfds; j++ {
			fd, own := someFD(self)
			if fd < 0 {
				continue
			}
			fds = append(fds, fd)
			if own {
				mine = append(mine, fd)
			}
		}
		ok := send(msg, fds)
		for _, fd := range mine {
			unix.Close(fd)
		}
		if !ok {
			stats["send failed"]++
			return
		}
		if rnd.Intn(150) == 0 {
			stats["hung up mid-call"]++
			return
		}
		h, ok := recv()
		if !ok {
			stats["no reply"]++
			return
		}
		stats[fmt.Sprintf("errno %d", h.Errno)]++
	}
}

func main() {
	node := flag.String("node", "", "the node")
	d := flag.Duration("d", 30*time.Second, "how long")
	seed := flag.Int64("seed", time.Now().UnixNano(), "seed")
	flag.Parse()
	rnd = rand.New(rand.NewSource(*seed))
	fmt.Println("seed", *seed)
	stats := map[string]int{}
	deadline := time.Now().Add(*d)
	sessions := 0
	for time.Now().Before(deadline) {
		session(*node, deadline, stats)
		sessions++
		for _, fd := range handed {
			if rnd.Intn(2) == 0 {
				unix.Close(fd)
			}
		}
		handed = handed[:0]
		if len(vas) > 200 {
			vas = vas[:0]
		}
	}
	fmt.Println("sessions", sessions)
	for k, v := range stats {
		fmt.Printf("  %-40s %d\n", k, v)
	}
	os.Exit(0)
}
