package softgpu_test

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkBaseline measures the machine itself, in the same run as the
// stage's figures, so each can be read as a fraction of what is possible.
// No device is open while these run.
func BenchmarkBaseline(b *testing.B) {
	// pingpong: two goroutines bounce one cache line, pure spin — the
	// floor under any round trip between a host and an engine thread.
	b.Run("pingpong", func(b *testing.B) {
		pp := startPingPong()
		m := startMeter()
		for b.Loop() {
			pp.serve()
		}
		m.report(b)
		pp.stop()
	})
	// handoff: the three lines a round trip hands across, and nothing
	// else — the floor under RoundTrip that pingpong is not (see handoff).
	b.Run("handoff", func(b *testing.B) {
		h := startHandoff()
		m := startMeter()
		for b.Loop() {
			h.roundTrip()
		}
		m.report(b)
		h.stop()
	})
	// memmove: a plain copy between two Go slices, the ceiling for any
	// copy the CPU does on the device's behalf — measured as the copy
	// benchmarks are, on data the host has just written.
	for _, sz := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		b.Run("memmove/size="+sz.name, func(b *testing.B) {
			src, dst := touched(sz.n), touched(sz.n)
			measureCopies(b, src, toDevice, func() error {
				copy(dst, src)
				return nil
			})
		})
	}
}

// handoff is the bare shape of a round trip between a host and an engine,
// with no driver and no device: the host writes a command into a slot and
// stores its number to a doorbell; the engine, spinning on the doorbell,
// reads the slot and writes a completion; the host, spinning on the
// completion, reads it. Three cache lines change hands each time — the
// doorbell and the slot towards the engine, the completion back — and
// each transfer waits for the one before it: the engine cannot read the
// slot before it has seen the doorbell, nor complete before it has read
// the slot. A ping-pong moves one line, back and forth. Slots are a ring
// of 64 lines, each used once a lap as a ring's are. Both sides yield
// every 4,096 polls, which only matters with GOMAXPROCS=1.
type handoff struct {
	doorbell   paddedWord // the number of the last command written; the host writes it
	completion struct {   // the engine writes it, one line
		n      atomic.Uint64 // the number of the last command completed
		status uint64        // its result, written before n
		_      [48]byte
	}
	slots      [64]handoffSlot
	n          uint64        // the host's: the last command's number
	engineDone chan struct{} // closed when the engine has stopped
}

// handoffSlot is one command's line: two words of command, padded.
type handoffSlot struct {
	op, arg uint64
	_       [48]byte
}

// startHandoff starts the engine goroutine.
func startHandoff() *handoff {
	h := &handoff{engineDone: make(chan struct{})}
	go func() {
		defer close(h.engineDone)
		var seen uint64
		for polls := 1; ; polls++ {
			// This load pairs with the host's store of the doorbell in
			// roundTrip: seeing n, the slot written before it is
			// visible.
			n := h.doorbell.v.Load()
			if n == ^uint64(0) {
				return
			}
			if n != seen {
				seen = n
				s := &h.slots[n%uint64(len(h.slots))]
				h.completion.status = s.op ^ s.arg
				// Publishes the status; the host's load pairs.
				h.completion.n.Store(n)
			}
			if polls%(1<<12) == 0 {
				runtime.Gosched()
			}
		}
	}()
	return h
}

// roundTrip is one command: written, announced, completed, read back.
func (h *handoff) roundTrip() {
	h.n++
	s := &h.slots[h.n%uint64(len(h.slots))]
	s.op, s.arg = 1, h.n // the engine read this slot a lap ago, and is done with it
	h.doorbell.v.Store(h.n)
	// This load pairs with the engine's store of completion.n: seeing n, its
	// status is visible.
	for polls := 1; h.completion.n.Load() != h.n; polls++ {
		if polls%(1<<12) == 0 {
			runtime.Gosched()
		}
	}
	if h.completion.status != 1^h.n {
		panic("handoff: a completion without its status")
	}
}

// stop ends the engine and waits for it.
func (h *handoff) stop() {
	h.doorbell.v.Store(^uint64(0))
	<-h.engineDone
}
