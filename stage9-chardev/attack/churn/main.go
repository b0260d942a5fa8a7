// Attack: garbage in the ring and doorbell racing CHANNEL_CLOSE and the
// reopen of the same ids, from several connections at once.
//
// Each worker (its own connection, so its own context) opens a channel,
// maps its user memfd, starts a thread that writes random words into
// every slot, the doorbell and the IrqArm/IrqTarget words and FUTEX_WAKEs
// the doorbell in a tight loop, and closes the channel after a random
// short time, while the writer is still writing; then again.
//
// usage: churn -node PATH [-workers N] [-d DURATION]
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

type conn struct {
	sock *net.UnixConn
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
	c.sock.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, oobn, _, _, err := c.sock.ReadMsgUnix(buf, rob)
	if err != nil {
		return nil, err
	}
	got := uapi.ReceivedFDs(rob[:oobn])
	_, err = uapi.DecodeReply(buf[:n], len(got), arg)
	return got, err
}

var opened, closed, errs atomic.Int64

func worker(node string, id int, deadline time.Time) {
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer sock.Close()
	c := &conn{sock: sock}
	c.call(&uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}, nil)
	att := &uapi.Attach{}
	fds, err := c.call(att, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attach:", err)
		return
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	r := rand.New(rand.NewSource(int64(id)))
	for time.Now().Before(deadline) {
		co := &uapi.ChannelOpen{Engine: uint32(r.Intn(2)), Priority: uint32(r.Intn(int(abi.PriorityNormal) + 1))}
		fds, err := c.call(co, nil)
		if err != nil {
			errs.Add(1)
			time.Sleep(time.Millisecond)
			continue
		}
		opened.Add(1)
		user := fds[uapi.ChannelFDUser]
		mem, err := unix.Mmap(user, 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mmap:", err)
			return
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			wr := rand.New(rand.NewSource(seed))
			words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
			slots := words[abi.RegPageSize/8:]
			db := (*uint64)(unsafe.Pointer(&mem[abi.RegDoorbell]))
			for !stop.Load() {
				for k := 0; k < 64; k++ {
					i := wr.Intn(len(slots))
					switch wr.Intn(4) {
					case 0:
						slots[i] = wr.Uint64()
					case 1:
						slots[i] = uint64(wr.Intn(16)) // small opcodes and fields
					case 2:
						slots[i] = uint64(att.Context) | uint64(wr.Intn(64))<<32
					default:
						slots[i] = ^uint64(0)
					}
				}
				words[abi.RegIrqArm/8] = uint64(wr.Intn(4))
				words[abi.RegIrqTarget/8] = wr.Uint64()
				switch wr.Intn(4) {
				case 0:
					atomic.StoreUint64(db, wr.Uint64())
				case 1:
					atomic.AddUint64(db, 1)
				case 2:
					atomic.StoreUint64(db, atomic.LoadUint64(db)+uint64(wr.Intn(300)))
				default:
					atomic.AddUint64(db, ^uint64(0))
				}
				unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(db)), 1 /* FUTEX_WAKE */, 1<<30, 0, 0, 0)
			}
		}(r.Int63())
		time.Sleep(time.Duration(r.Intn(3000)) * time.Microsecond)
		if _, err := c.call(&uapi.ChannelClose{Channel: co.Channel}, nil); err != nil {
			errs.Add(1)
		} else {
			closed.Add(1)
		}
		// The writer goes on a little after the close.
		time.Sleep(time.Duration(r.Intn(500)) * time.Microsecond)
		stop.Store(true)
		wg.Wait()
		unix.Munmap(mem)
	}
}

func main() {
	node := flag.String("node", "", "the node")
	workers := flag.Int("workers", 4, "connections")
	d := flag.Duration("d", 20*time.Second, "how long")
	flag.Parse()
	deadline := time.Now().Add(*d)
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); worker(*node, i, deadline) }()
	}
	wg.Wait()
	fmt.Printf("opened %d, closed %d, refused/failed %d\n", opened.Load(), closed.Load(), errs.Load())
}
