package server_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// A client's ring and doorbell are memory it writes at will. The engines
// read them as input: garbage in a slot is a failed command of that
// client's, a doorbell that breaks the protocol faults that client's
// channel, and neither reaches the daemon or any other client — which a
// well-behaved client, running beside the hostile one the whole time,
// checks byte by byte.

// bystander is a well-behaved client that writes, reads back and checks
// a new pattern over and over until stopped.
type bystander struct {
	t     testing.TB
	laps  atomic.Uint64 // patterns written, read back and checked
	stopc chan struct{}
	done  sync.WaitGroup
}

// startBystander connects a well-behaved client to s and starts its loop.
func startBystander(t testing.TB, s *server.Server) *bystander {
	t.Helper()
	g := dial(t, s)
	const size = 96 << 10
	p, err := g.Alloc(size)
	require.NoError(t, err)
	b := &bystander{t: t, stopc: make(chan struct{})}
	b.done.Go(func() { b.loop(g, p, size) })
	t.Cleanup(b.stop)
	return b
}

// loop is the bystander's life: write a pattern, read it back, check
// every byte; then fill and check. It reports the first difference and
// stops there.
func (b *bystander) loop(g *client.GPU, p client.Ptr, size int) {
	got := make([]byte, size)
	for lap := 0; ; lap++ {
		select {
		case <-b.stopc:
			return
		default:
		}
		want := pattern(byte(lap), size)
		if err := g.Write(p, want); err != nil {
			b.t.Errorf("bystander lap %d: Write: %v", lap, err)
			return
		}
		if err := g.Read(got, p); err != nil {
			b.t.Errorf("bystander lap %d: Read: %v", lap, err)
			return
		}
		if i := firstDiff(got, want); i >= 0 {
			b.t.Errorf("bystander lap %d: byte %d reads %#x; want %#x", lap, i, got[i], want[i])
			return
		}
		if err := g.Fill(p, uint64(size), byte(lap)); err != nil {
			b.t.Errorf("bystander lap %d: Fill: %v", lap, err)
			return
		}
		if err := g.Read(got, p); err != nil {
			b.t.Errorf("bystander lap %d: Read: %v", lap, err)
			return
		}
		for i, x := range got {
			if x != byte(lap) {
				b.t.Errorf("bystander lap %d: byte %d reads %#x after Fill; want %#x", lap, i, x, byte(lap))
				return
			}
		}
		b.laps.Add(1)
	}
}

// checkpoint waits for the bystander to finish a whole lap begun after
// this call: it is still making progress, after whatever the test did.
func (b *bystander) checkpoint() {
	b.t.Helper()
	start := b.laps.Load()
	waitFor(b.t, "the bystander completing another lap", func() (bool, string) {
		return b.laps.Load() >= start+2, "" // start+1 may be the lap already under way
	})
}

// stop ends the loop and waits for it. Idempotent.
func (b *bystander) stop() {
	select {
	case <-b.stopc:
	default:
		close(b.stopc)
	}
	b.done.Wait()
}

func TestGarbageInTheRingFailsOnlyItsOwnCommands(t *testing.T) {
	s := serve(t, server.Config{})
	by := startBystander(t, s)
	r := dialRaw(t, s.Node())
	r.attach()
	va := r.alloc(64 << 10)
	rng := rand.New(rand.NewPCG(1, 2))
	for e := range abi.Engine(abi.NumEngines) {
		ch := r.openChannel(e)
		// A lap of random bytes: no such slot is a command (its reserved
		// bytes are not zero, to start with), so each must fail.
		for range ch.size {
			i := ch.next
			for j := range ch.slot(i) {
				ch.slot(i)[j] = byte(rng.Uint32())
			}
			ch.next++
		}
		ch.ring(ch.next)
		for i := ch.head; i != ch.next; i++ {
			if st := ch.wait(i); st == abi.StatusOK {
				t.Errorf("%v: random bytes in slot of index %d completed OK", e, i)
			}
		}
		// A lap of commands that pass the descriptor checks with random
		// operands in the client's own context: each completes somehow.
		ops := []abi.Opcode{abi.OpNop, abi.OpFill, abi.OpCopy, abi.OpSum32, abi.OpAdd32}
		first := ch.next
		for range ch.size {
			addr := func() uint64 {
				if rng.IntN(2) == 0 {
					return va + rng.Uint64N(128<<10)
				}
				return rng.Uint64()
			}
			ch.put(abi.Command{Op: ops[rng.IntN(len(ops))], Flags: uint8(rng.IntN(4)), Ctx: r.ctx,
				Src: addr(), Dst: addr(), Size: rng.Uint64() >> rng.IntN(64), Value: rng.Uint64(), Fence: rng.Uint64()})
		}
		ch.ring(ch.next)
		for i := first; i != ch.next; i++ {
			ch.wait(i)
		}
		if f := ch.fault(); f != abi.FaultNone {
			t.Errorf("%v: bad commands faulted the channel (%v): a bad command fails alone", e, f)
		}
		by.checkpoint()
	}
	if errno, _ := r.call(&uapi.Info{}); errno != uapi.OK {
		t.Errorf("INFO after the garbage: %v", errno)
	}
}

func TestABadDoorbellFaultsOnlyItsChannel(t *testing.T) {
	s := serve(t, server.Config{})
	by := startBystander(t, s)
	r := dialRaw(t, s.Node())
	r.attach()
	tests := []struct {
		name     string
		runFirst uint64                      // NOPs run before the bad doorbell
		doorbell func(ch *rawChannel) uint64 // the bad value
	}{
		{"four rings past the head", 0, func(ch *rawChannel) uint64 { return ch.head + 4*ch.size }},
		{"a ring and one past the head", 0, func(ch *rawChannel) uint64 { return ch.head + ch.size + 1 }},
		{"2^64-1 past the head", 0, func(ch *rawChannel) uint64 { return ch.head - 1 }},
		{"backwards by one", 2, func(ch *rawChannel) uint64 { return ch.head + 1 }},
		{"backwards to before the channel", 2, func(ch *rawChannel) uint64 { return ch.head - 5 }},
	}
	for _, tt := range tests {
		// Both engines' channels are open at once and closed together, so
		// that each id goes back to the engine that had it. (An id that
		// moves from one engine to the other after a fault is handed over
		// through the shared register space, whose atomic words the race
		// detector cannot see — device.Config.Shared — and -race would
		// report the handover as a race.)
		var faulted []*rawChannel
		for e := range abi.Engine(abi.NumEngines) {
			ch := r.openChannel(e)
			faulted = append(faulted, ch)
			for range tt.runFirst {
				ch.put(abi.Command{Op: abi.OpNop, Ctx: r.ctx})
			}
			ch.ring(ch.next)
			for i := ch.head; i != ch.next; i++ {
				require.Equal(t, abi.StatusOK, ch.wait(i), "%s, %v: NOP before the bad doorbell", tt.name, e)
			}
			bad := tt.doorbell(ch)
			ch.ring(bad)
			waitFor(t, tt.name+": the channel faulting", func() (bool, string) {
				return ch.fault() == abi.FaultDoorbell, "fault " + ch.fault().String()
			})
			assert.Equal(t, bad, word(ch.status, uapi.StatusPageOffset+abi.RegChannelFaultValue).Load(), "%s, %v: RegChannelFaultValue; want the bad doorbell %#x", tt.name, e, bad)
		}
		for _, ch := range faulted {
			if errno, _ := r.call(&uapi.ChannelClose{Channel: uint32(ch.id)}); errno != uapi.OK {
				t.Errorf("%s: CHANNEL_CLOSE of the faulted %v: %v", tt.name, ch.id, errno)
			}
		}
		by.checkpoint()
	}
	// The client itself goes on: a new channel works.
	ch := r.openChannel(abi.EngineCopy)
	i := ch.put(abi.Command{Op: abi.OpNop, Ctx: r.ctx})
	ch.ring(ch.next)
	require.Equal(t, abi.StatusOK, ch.wait(i), "NOP on a new channel after the faults")
}
