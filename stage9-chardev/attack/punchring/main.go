// Attack: punch the pages of the channel's user memfd (doorbell page and
// submission ring) out from under the daemon's mapping while its engine
// sleeps in futex_waitv on the doorbell word, and wake it. A futex_waitv
// error other than EAGAIN/EINTR/ETIMEDOUT panics the daemon
// (device/kick.go, park).
//
// usage: punchring -node PATH [-d DURATION]
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

func main() {
	node := flag.String("node", "", "the node")
	d := flag.Duration("d", 10*time.Second, "how long")
	flag.Parse()
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: *node, Net: "unixpacket"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	seq := uint64(0)
	call := func(arg uapi.Arg) []int {
		seq++
		sock.WriteMsgUnix(uapi.EncodeCall(seq, arg), nil, nil)
		buf := make([]byte, 512)
		oob := make([]byte, 512)
		n, oobn, _, _, err := sock.ReadMsgUnix(buf, oob)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fds := uapi.ReceivedFDs(oob[:oobn])
		if _, err := uapi.DecodeReply(buf[:n], len(fds), arg); err != nil {
			fmt.Fprintf(os.Stderr, "%T: %v\n", arg, err)
			os.Exit(2)
		}
		return fds
	}
	call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})
	call(&uapi.Attach{})
	var users []int
	var maps [][]byte
	for e := uint32(0); e < 2; e++ {
		co := &uapi.ChannelOpen{Engine: e}
		fds := call(co)
		user := fds[uapi.ChannelFDUser]
		m, err := unix.Mmap(user, 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		users = append(users, user)
		maps = append(maps, m)
	}
	n := 0
	for end := time.Now().Add(*d); time.Now().Before(end); n++ {
		for i, user := range users {
			if err := unix.Fallocate(user, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(maps[i]))); err != nil && n == 0 {
				fmt.Println("fallocate:", err)
			}
			if n%2 == 1 {
				unix.Madvise(maps[i], unix.MADV_REMOVE)
			}
			db := (*uint32)(unsafe.Pointer(&maps[i][abi.RegDoorbell]))
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(db)), 1, 1<<30, 0, 0, 0)
		}
		time.Sleep(time.Duration(50+n%300) * time.Microsecond)
	}
	fmt.Printf("%d rounds of punching both channels' user memfds and waking the engines\n", n)
}
