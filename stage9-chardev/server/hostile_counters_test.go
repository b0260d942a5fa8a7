package server_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// One client learns nothing of another's work (issue 32, item 10). Every
// client maps the public pages (ATTACH's public memfd: the global page and
// each engine's status page), so any word there that moves with the
// device's work is a window on every other client's: TLB misses tell how
// much memory another client touches, preemptions and switches when it
// submits, the fault buffer's pointers when its managed memory faults,
// the command count how many commands it runs. Those counters live in
// pages no client maps; the daemon reports them device-wide through INFO,
// and a client has its own channels' counters in their status pages.
//
// What is left on the public pages moves only as the need-wakeup
// handshake requires: RegNeedWakeup, which a client must load after its
// doorbell store, and RegEngineState beside it, tell whether an engine is
// asleep — that an engine is busy, not whose work it runs or how much.

func init() {
	strangerRoles["watch-public"] = watchPublic
}

// watchPublic attaches, maps the public memfd, reads every word of it,
// says "ready", waits for a line on stdin, reads every word again, and
// reports each word that changed: "changed <offset>".
func watchPublic(node, _ string) error {
	sock, a, fds, err := strangerAttach(node)
	if err != nil {
		return err
	}
	defer sock.Close()
	public, err := unix.Mmap(fds[uapi.AttachFDPublic], 0, int(a.PublicSize), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	snapshot := func() []uint64 {
		words := make([]uint64, len(public)/8)
		for i := range words {
			words[i] = word(public, uint64(8*i)).Load()
		}
		return words
	}
	before := snapshot()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	after := snapshot()
	for i := range before {
		if before[i] != after[i] {
			fmt.Printf("changed %#x\n", 8*i)
		}
	}
	fmt.Println("done")
	return nil
}

// strangerAttach is a stranger role's raw start: it connects to the node,
// makes VERSION and ATTACH by hand, and returns the socket (the caller
// closes it), the attachment and the descriptors its reply carried.
func strangerAttach(node string) (*net.UnixConn, uapi.Attach, []int, error) {
	var a uapi.Attach
	sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
	if err != nil {
		return nil, a, nil, err
	}
	if _, err := strangerCall(sock, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor}); err != nil {
		sock.Close()
		return nil, a, nil, err
	}
	fds, err := strangerCall(sock, &a)
	if err != nil {
		sock.Close()
		return nil, a, nil, err
	}
	return sock, a, fds, nil
}

// strangerCall is a raw call for a stranger role, which has no
// testing.T for rawConn: arg out, arg back filled, and the descriptors
// the reply carried; a reply's errno is the error.
func strangerCall(sock *net.UnixConn, arg uapi.Arg, fds ...int) ([]int, error) {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := sock.WriteMsgUnix(uapi.EncodeCall(1, arg), oob, nil); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, uapi.MaxMessage+1), make([]byte, unix.CmsgSpace(4*uapi.MaxFDs))
	n, oobn, _, _, err := sock.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	got := parseRights(oob[:oobn])
	h, err := uapi.DecodeReply(buf[:n], len(got), arg)
	if err == nil && h.Errno != uapi.OK {
		err = h.Errno
	}
	return got, err
}

// publicName names the register at offset off of the public memfd.
func publicName(off uint64) string {
	regOff := off // the global page is at the same offset in both
	if off >= uapi.PublicEngineOffset(0) {
		e := abi.Engine((off - uapi.PublicEngineOffset(0)) / abi.RegPageSize)
		regOff = abi.EngineStatusPage(e) + (off-uapi.PublicEngineOffset(0))%abi.RegPageSize
	}
	for _, r := range abi.Table() {
		if r.Offset == regOff {
			return r.Name
		}
	}
	return fmt.Sprintf("offset %#x", off)
}

func TestAStrangerSeesNothingOfAnothersWork(t *testing.T) {
	d := startDaemon(t)
	w := dialWellBehaved(t, d.node)
	w.roundTrip(t, "before", 1)
	cred, _ := strangerCred()
	s := startStranger(t, "watch-public", d.node, "", cred)
	s.until(t, "ready")

	// The victim's work: memory allocated, touched and freed (TLB misses
	// and invalidations), host memory copied (the DMA window), a channel
	// opened and closed (runlists), DELAYs on both engines at two
	// priorities (switches, preemptions), managed memory the device
	// faults in (the fault buffer), and sleeps between.
	const size = 4 << 20
	for round := range 3 {
		p, err := w.g.Alloc(size)
		require.NoError(t, err)
		require.NoError(t, w.g.Fill(p, size, byte(round)))
		h, err := w.g.HostAlloc(1 << 20)
		require.NoError(t, err)
		require.NoError(t, w.g.Copy(h.Ptr(), p, 1<<20))
		ch, err := w.g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityHigh})
		require.NoError(t, err)
		b := w.g.NewBatch(client.Compute)
		b.Delay(uint64(20 * time.Millisecond))
		pending, err := b.Submit()
		require.NoError(t, err)
		require.NoError(t, ch.Nop())
		require.NoError(t, pending.Wait())
		ch.Close()
		// Managed memory the device faults in: the fault buffer.
		m, err := w.g.AllocManaged(256 << 10)
		require.NoError(t, err)
		require.NoError(t, w.g.Fill(m.Ptr(), 256<<10, byte(round)))
		require.NoError(t, m.Free())
		require.NoError(t, w.g.Free(p))
		time.Sleep(5 * time.Millisecond) // the engines go to sleep
	}
	fmt.Fprintln(s.stdin, "go")
	var changed []string
	for _, line := range s.findings(t) {
		off, err := strconv.ParseUint(strings.TrimPrefix(line, "changed "), 0, 64)
		require.NoError(t, err, "the stranger says %q", line)
		changed = append(changed, publicName(off))
	}
	// What the need-wakeup handshake needs a client to read, and no more.
	allowed := []string{}
	for e := range abi.Engine(abi.NumEngines) {
		allowed = append(allowed, fmt.Sprintf("Engine[%d].State", e), fmt.Sprintf("Engine[%d].NeedWakeup", e))
	}
	for _, name := range changed {
		if !slices.Contains(allowed, name) {
			t.Errorf("a stranger's public pages changed with another client's work: %s", name)
		}
	}
	w.roundTrip(t, "after", 2)
	d.stop(t)
}
