package softgpu_test

import (
	"runtime"
	"sync/atomic"
)

// The bare rings that Baseline measures: the shape of a round trip between
// a host and an engine goroutine with no driver and no device, so that a
// stage's RoundTrip can be read against what its cache lines alone cost.
// Each differs from the next in how many lines change hands per command.
//
//	handoff  3 lines: a slot and a doorbell to the engine, a completion
//	         back — the shape of every stage's ring (stage 1's, io_uring's,
//	         NVMe's), and the floor under RoundTrip
//	inline   2 lines: the command written into the doorbell's own line, so
//	         the engine that sees the doorbell has the command (as
//	         Mellanox's BlueFlame and Intel's MOVDIR64B write a descriptor
//	         into the device's doorbell page), and a completion back
//	packed   1 line: the engine polls the next slot itself and writes the
//	         completion back into it (virtio's packed ring); no doorbell
//
// In each, a transfer waits for the one before it: the engine cannot read
// a command before it has seen that there is one, nor complete it before
// it has read it. Both sides yield every 4,096 polls, which only matters
// with GOMAXPROCS=1.

// bareRing is one of the bare rings, started.
type bareRing interface {
	roundTrip() // one command: written, announced, completed, read back
	stop()      // end the engine goroutine and wait for it
}

var bareRings = []struct {
	name  string
	start func() bareRing
}{
	{"handoff", func() bareRing { return startHandoff() }},
	{"inline", func() bareRing { return startInline() }},
	{"packed", func() bareRing { return startPacked() }},
}

// spinUntil polls cond, yielding every 4,096 polls.
func spinUntil(cond func() bool) {
	for polls := 1; !cond(); polls++ {
		if polls%(1<<12) == 0 {
			runtime.Gosched()
		}
	}
}

// completionLine is a completion on a line of its own: the engine writes
// the status, then the command's number, which the host polls.
type completionLine struct {
	n      atomic.Uint64 // the number of the last command completed
	status uint64        // its result, written before n
	_      [48]byte
}

// await spins until command n of the ring named ring has completed, and
// checks its status. The load pairs with the engine's store of n: seeing
// it, the status is visible.
func (c *completionLine) await(n uint64, ring string) {
	spinUntil(func() bool { return c.n.Load() == n })
	c.check(n, ring)
}

// check panics unless the status beside completion n is its command's
// answer (every engine here answers 1^n). The caller has seen n.
func (c *completionLine) check(n uint64, ring string) {
	if c.status != 1^n {
		panic(ring + ": a completion without its status")
	}
}

// handoffLines are the three lines of the handoff ring, and the two
// halves of a command's trip through them: the host writes a command into
// a slot of a ring of 64 lines and stores its number to a doorbell on a
// line of its own (post); the engine, polling the doorbell, reads the slot
// and writes the completion line (serve); the host, polling that, reads
// it. How each side polls, and when it yields, is the ring's own:
// handoff's here, spinningHandoff's in spinning_ring_test.go.
type handoffLines struct {
	doorbell   paddedWord // the number of the last command written; the host writes it
	completion completionLine
	slots      [64]handoffSlot
	n          uint64 // the host's: the last command's number
}

// handoffSlot is one command's line: two words of command, padded.
type handoffSlot struct {
	op, arg uint64
	_       [48]byte
}

// post is the host's half: it writes the next command into its slot and
// rings the doorbell, and returns the command's number.
func (h *handoffLines) post() uint64 {
	h.n++
	s := &h.slots[h.n%uint64(len(h.slots))]
	s.op, s.arg = 1, h.n // the engine read this slot a lap ago, and is done with it
	h.doorbell.v.Store(h.n)
	return h.n
}

// serve is the engine's half for command n, whose number it has just
// loaded from the doorbell: that load pairs with post's store, so the
// slot written before it is visible.
func (h *handoffLines) serve(n uint64) {
	s := &h.slots[n%uint64(len(h.slots))]
	h.completion.status = s.op ^ s.arg
	h.completion.n.Store(n) // publishes the status; the host's load pairs
}

// handoff is the three-line ring with both sides spinning as the other
// bare rings' do, yielding every 4,096 polls.
type handoff struct {
	handoffLines
	engineDone chan struct{} // closed when the engine has stopped
}

// startHandoff starts the engine goroutine.
func startHandoff() *handoff {
	h := &handoff{engineDone: make(chan struct{})}
	go func() {
		defer close(h.engineDone)
		var seen uint64
		for polls := 1; ; polls++ {
			n := h.doorbell.v.Load() // pairs with post's store (see serve)
			if n == ^uint64(0) {
				return
			}
			if n != seen {
				seen = n
				h.serve(n)
			}
			if polls%(1<<12) == 0 {
				runtime.Gosched()
			}
		}
	}()
	return h
}

func (h *handoff) roundTrip() { h.completion.await(h.post(), "handoff") }

func (h *handoff) stop() {
	h.doorbell.v.Store(^uint64(0))
	<-h.engineDone
}

// inline is the two-line ring: the command travels in the doorbell's own
// line. The host writes the command's words, then its number, into that
// line; the engine, polling the number, finds the command beside it.
type inline struct {
	doorbell struct { // the host writes it, one line
		n       atomic.Uint64 // the number of the command beside it
		op, arg uint64        // the command, written before n
		_       [40]byte
	}
	completion completionLine
	n          uint64        // the host's: the last command's number
	engineDone chan struct{} // closed when the engine has stopped
}

func startInline() *inline {
	r := &inline{engineDone: make(chan struct{})}
	go func() {
		defer close(r.engineDone)
		var seen uint64
		for polls := 1; ; polls++ {
			// This load pairs with the host's store of doorbell.n: seeing
			// n, the command written before it is visible. The host
			// writes the next command only after this one's completion,
			// so it is still there.
			n := r.doorbell.n.Load()
			if n == ^uint64(0) {
				return
			}
			if n != seen {
				seen = n
				r.completion.status = r.doorbell.op ^ r.doorbell.arg
				r.completion.n.Store(n) // publishes the status; the host's load pairs
			}
			if polls%(1<<12) == 0 {
				runtime.Gosched()
			}
		}
	}()
	return r
}

func (r *inline) roundTrip() {
	r.n++
	r.doorbell.op, r.doorbell.arg = 1, r.n // the engine is done with the last command: it completed
	r.doorbell.n.Store(r.n)
	r.completion.await(r.n, "inline")
}

func (r *inline) stop() {
	r.doorbell.n.Store(^uint64(0))
	<-r.engineDone
}

// packed is the one-line ring: no doorbell and no separate completion. The
// host writes command n into slot n of a ring of 64 lines and marks it
// written (state 2n-1); the engine, polling the slot it expects next, runs
// it and writes the status and the mark "completed" (2n) back into the same
// line, which the host polls.
type packed struct {
	slots      [64]packedSlot
	n          uint64        // the host's: the last command's number
	stopping   atomic.Bool   // set by stop; the engine looks at it while it waits
	engineDone chan struct{} // closed when the engine has stopped
}

// packedSlot is one command's line, and its completion's.
type packedSlot struct {
	state   atomic.Uint64 // 2n-1: command n written; 2n: command n completed
	op, arg uint64        // the command, written before the state 2n-1
	status  uint64        // its result, written before the state 2n
	_       [32]byte
}

func startPacked() *packed {
	r := &packed{engineDone: make(chan struct{})}
	go func() {
		defer close(r.engineDone)
		next := uint64(1) // the command the engine expects
		for polls := 1; ; polls++ {
			s := &r.slots[next%uint64(len(r.slots))]
			// This load pairs with the host's store of the state 2n-1:
			// seeing it, the command written before it is visible.
			if s.state.Load() == 2*next-1 {
				s.status = s.op ^ s.arg
				s.state.Store(2 * next) // publishes the status; the host's load pairs
				next++
				continue
			}
			if r.stopping.Load() {
				return
			}
			if polls%(1<<12) == 0 {
				runtime.Gosched()
			}
		}
	}()
	return r
}

func (r *packed) roundTrip() {
	r.n++
	s := &r.slots[r.n%uint64(len(r.slots))]
	s.op, s.arg = 1, r.n // a lap ago the engine completed this slot's command, and is done with it
	s.state.Store(2*r.n - 1)
	// This load pairs with the engine's store of the state 2n.
	spinUntil(func() bool { return s.state.Load() == 2*r.n })
	if s.status != 1^r.n {
		panic("packed: a completion without its status")
	}
}

func (r *packed) stop() {
	r.stopping.Store(true)
	<-r.engineDone
}
