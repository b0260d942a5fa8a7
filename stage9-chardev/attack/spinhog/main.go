// Attack: hold both engines with SPINs (no preemption point), a fresh
// context each time the watchdog resets an engine and faults the last.
//
// usage: spinhog -node PATH [-d DURATION]
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

func word(b []byte, off uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[off])) }

func round(node string) error {
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
	afds, err := call(att)
	if err != nil {
		return err
	}
	kick := afds[uapi.AttachFDKick]
	var statuses [][]byte
	var spins []uint64
	var masks []uint64
	for e := uint32(0); e < 2; e++ {
		co := &uapi.ChannelOpen{Engine: e}
		fds, err := call(co)
		if err != nil {
			return fmt.Errorf("CHANNEL_OPEN on engine %d: %w", e, err)
		}
		user, _ := unix.Mmap(fds[uapi.ChannelFDUser], 0, int(co.UserSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		status, _ := unix.Mmap(fds[uapi.ChannelFDStatus], 0, int(co.StatusSize), unix.PROT_READ, unix.MAP_SHARED)
		mask := uint64(co.RingSize) - 1
		head := word(user, abi.RegDoorbell).Load()
		cmd := abi.Command{Op: abi.OpSpin, Ctx: abi.Context(att.Context), Value: 1 << 62, Seq: head}
		cmd.Encode(user[uapi.UserRingOffset+abi.SlotOffset(head, mask):][:abi.CommandSize])
		word(user, abi.RegDoorbell).Store(head + 1)
		db := unsafe.Pointer(&user[abi.RegDoorbell])
		unix.Syscall6(unix.SYS_FUTEX, uintptr(db), 1, 1<<30, 0, 0, 0)
		one := [8]byte{1}
		unix.Write(kick, one[:])
		statuses = append(statuses, status)
		spins = append(spins, head)
		masks = append(masks, mask)
	}
	// Wait for both SPINs to be stopped (their completions), at most 10 s.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		done := 0
		for i, st := range statuses {
			w := uapi.StatusCompletionsOffset + 8*abi.CompletionWord(spins[i], masks[i])
			if abi.Completed(word(st, w+8*uapi.CompletionIndexWord).Load(), spins[i]) {
				done++
			}
		}
		if done == len(statuses) {
			return nil
		}
	}
	return nil
}

func main() {
	node := flag.String("node", "", "the node")
	d := flag.Duration("d", 20*time.Second, "how long")
	flag.Parse()
	n := 0
	for end := time.Now().Add(*d); time.Now().Before(end); n++ {
		t0 := time.Now()
		if err := round(*node); err != nil {
			fmt.Fprintln(os.Stderr, "round:", err)
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Printf("round %d: %v\n", n, time.Since(t0).Round(time.Millisecond))
	}
}
