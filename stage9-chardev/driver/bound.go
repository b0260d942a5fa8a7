package driver

// Bounded waits: stage 9's threat model, in the driver's half.
//
// In stage 9 this driver runs in softgpud, and everything its waits
// depend on — what is queued on a channel, how long a command runs, when
// a channel passes a mark — is chosen by clients that are strangers to
// the daemon and to each other. So here, and only here (the in-process
// stages trust their one program, and keep their unbounded spins), a
// wait on device or shared state that a client can prolong has a
// deadline past which the caller gets ErrTimeout, and a wait for a
// client's work waits only on channels of that client. See the package
// comment (driver.go) for the rule and the list.

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// ErrTimeout reports a wait on the device that passed its bound.
var ErrTimeout = errors.New("softgpu: the device did not answer within its bound")

// retireWait bounds how long HostAlloc (HOST_REGISTER) waits, with every
// window entry taken, for one retiring behind commands still queued:
// those commands are a client's, and may be a DELAY of 2^62 cycles. Past
// it the caller gets ErrNoWindow, and may try again.
const retireWait = 100 * time.Millisecond

// spinBounded polls cond until it reports true, yielding now and then,
// for at most bound; then it returns ErrTimeout.
func spinBounded(cond func() bool, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for polls := 1; !cond(); polls++ {
		if polls%64 == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%w (%v)", ErrTimeout, bound)
			}
			runtime.Gosched()
		}
	}
	return nil
}

// namers returns a test of whether a channel could name region p: its
// context maps p, or it is in context 0, the driver's own, which names
// host memory by bus address. A freed entry retires once those channels
// have passed what was queued before the free; another client's channel,
// which cannot reach p, never holds it (a stranger's DELAY that never
// ends would otherwise hold the entry for good). Driver.pinMu is held.
func namers(p *Pinned) func(*Channel) bool {
	ctxs := make(map[*Context]bool, len(p.mapped))
	for _, m := range p.mapped {
		ctxs[m.ctx] = true
	}
	return func(ch *Channel) bool {
		c := ch.Context()
		return c == nil || c.ID() == 0 || ctxs[c]
	}
}
