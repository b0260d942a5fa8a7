package server_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// A client that does not read what the daemon sends it — replies on its
// socket, completions in its ring, interrupts on its eventfd — holds up
// only itself. A reply waits at most Config.WriteTimeout; completions and
// interrupts are stores and non-blocking eventfd writes that never wait.

// flood sends INFO calls without reading a reply until a send blocks for
// a while (the daemon has stopped reading: it is stuck on a reply) or
// fails (the daemon has dropped the connection). It returns that error.
func flood(t testing.TB, r *rawConn) error {
	t.Helper()
	msg := uapi.EncodeCall(1, &uapi.Info{})
	for n := 0; n < 1_000_000; n++ {
		r.sock.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		if _, _, err := r.sock.WriteMsgUnix(msg, nil, nil); err != nil {
			return err
		}
	}
	t.Fatalf("a million calls sent without reading a reply, and the daemon still reads them")
	return nil
}

func TestAClientThatNeverReadsIsDropped(t *testing.T) {
	s := serve(t, server.Config{WriteTimeout: 100 * time.Millisecond})
	ctl := control(t, s.Node())
	r := dialRaw(t, s.Node())
	r.negotiate()
	flood(t, r)
	waitClients(t, ctl, 1)
	// Its end of the connection holds the replies the daemon sent, then
	// the end of the connection.
	buf := make([]byte, uapi.MaxMessage+1)
	for n := 0; ; n++ {
		r.sock.SetReadDeadline(time.Now().Add(patience))
		got, _, _, _, err := r.sock.ReadMsgUnix(buf, nil)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("after %d replies the dropped connection is still open", n)
			}
			break // ECONNRESET: an end as good as EOF
		}
		if got == 0 {
			break
		}
	}
}

func TestAClientThatNeverReadsStallsNoOther(t *testing.T) {
	// The write timeout is far longer than the test: the hostile client
	// stays connected, its daemon goroutine stuck on a reply, throughout.
	s := serve(t, server.Config{WriteTimeout: time.Hour})
	ctl := control(t, s.Node())
	r := dialRaw(t, s.Node())
	r.negotiate()
	var ne net.Error
	if err := flood(t, r); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("flooding a daemon with an hour's write timeout: %v; want a send that times out", err)
	}
	by := startBystander(t, s)
	by.checkpoint()
	if n := clientCount(t, ctl); n != 3 {
		t.Errorf("the daemon lists %d clients; want 3: the control, the bystander, and the one that never reads", n)
	}
	by.stop()
	r.sock.Close() // the stuck reply fails; the daemon tears it down
	waitClients(t, ctl, 2)
}

// TestAClientThatNeverReapsStallsNoOther: a client fills both its rings
// with commands that each raise an interrupt, arms every interrupt (each
// a futex wake of a word no one sleeps on), and then never looks at a
// completion or its irq eventfd again.
func TestAClientThatNeverReapsStallsNoOther(t *testing.T) {
	s := serve(t, server.Config{})
	ctl := control(t, s.Node())
	by := startBystander(t, s)
	r := dialRaw(t, s.Node())
	r.attach()
	const size = 64 << 10
	va := r.alloc(size)
	var last []*rawChannel
	for e := range abi.Engine(abi.NumEngines) {
		ch := r.openChannel(e)
		word(ch.user, abi.RegIrqArm).Store(abi.IrqEvery)
		for range ch.size {
			ch.put(abi.Command{Op: abi.OpFill, Flags: abi.FlagFence | abi.FlagInterrupt, Ctx: r.ctx,
				Dst: va, Size: size, Value: 0x99, Fence: ch.next + 1})
		}
		ch.ring(ch.next)
		last = append(last, ch)
	}
	by.checkpoint()
	by.checkpoint()
	for _, ch := range last {
		ch.wait(ch.next - 1) // the test looks; the client never did
	}
	by.checkpoint()
	r.sock.Close()
	waitClients(t, ctl, 2)
}
