package device

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/internal/futex"
)

// This file is how a sleeping engine of a shared device (Config.Shared)
// is woken from another process: the kick. In-process, a sleeping engine
// is a goroutine parked on a channel (idle.go), and the driver's Wake
// sends it a token. A client in another process cannot send on a Go
// channel; what it can do is store to the pages it maps and make system
// calls. So an engine of a shared device sleeps in the kernel instead, in
// one futex_waitv on these words:
//
//	its kick word        private to the daemon; WakeEngine (the daemon's
//	                     driver: a runlist submit, a replay, Close, a
//	                     Wake of a channel of its own) adds 1 to it and
//	                     wakes it
//	the RegDoorbell of   each shared channel on its runlist that has not
//	every client channel faulted, in the channel's user page, which the
//	                     client maps read-write; the client stores its
//	                     tail there and, if it then loads RegNeedWakeup
//	                     as 1, calls FUTEX_WAKE on that same word
//
// The doorbell is the futex word, so the futex's value check is the
// doorbell check itself: the engine sleeps only while every doorbell
// still holds the tail it last accepted (chanState.tail), and a kick
// needs no word of its own, nor any page a client could write for
// another. This is the reverse of the fence's path (FenceVector, shared.go),
// where a client's waiter sleeps on its fence word and the engine wakes it.

// ANCHOR: kickhandshake

// The handshake, with the pairs (Go's atomics are sequentially consistent;
// so are a locked x86 store and load between processes):
//
//	engine (sleep, park)                     client (driver publish, wakeIfIdle)
//	S1 store 1 → RegNeedWakeup                C1 store tail → RegDoorbell
//	L1 load the kick word → armed             C2 load RegNeedWakeup: 1? →
//	L2 load every RegDoorbell (anyWork):         C3 FUTEX_WAKE(RegDoorbell)
//	   moved? → don't sleep
//	W  futex_waitv: sleep while kick = armed
//	   and each RegDoorbell = its tail
//
// No kick is lost. S1 pairs with C2, and C1 with L2: if L2 missed C1, then
// L2 came before C1 in the one order of the four accesses, so S1 came
// before C2, and C2 loads 1 — the client kicks. The kick cannot come too
// early for W either: in W the kernel compares each doorbell with its tail
// under the lock of the futex's hash bucket and queues the engine before
// it lets the lock go, and C3 takes that lock; so either W's comparison sees C1 (and returns at
// once) or the engine is queued when C3 looks for it (and is woken). The
// kick word is the same argument for the daemon's own wakes: a runlist
// submit stores RegRunlistGen and then adds to the kick word; if L2 missed
// the store, the add came after L1, so W's comparison sees it or the wake
// finds the engine queued.

// ANCHOR_END: kickhandshake

// What a hostile client can do with this. It can store anything to its
// doorbell and call FUTEX_WAKE on it as often as it likes; the engine
// never trusts either for more than "look at the runlist". A wake-up
// makes the engine run anyWork (loads of at most MaxRunlist doorbells)
// and sleep again — its idle time counts from its last command, so a
// spent budget sends it straight back; a doorbell the protocol forbids
// faults that client's channel (ring.go), which then leaves the words the
// engine sleeps on. The engines are the device's (two, shared by every
// client), so a spammer costs the others something: one look per wake-up,
// and only while the engine is asleep (a wake with nobody queued costs the
// daemon nothing). Each of those wake-ups costs the spammer a system call
// of its own, so the daemon's loss is bounded by the spammer's own CPU
// spent, times a scan of at most MaxRunlist words — never a command run
// wrongly, never another client's command delayed by more than one scan.
//
// The futex is the low 32 bits of each word (package futex). A doorbell
// that moved by a multiple of 2^32 would look unchanged; a tail cannot
// move that far past the head, so only a client storing a forbidden
// doorbell can do that, and it only leaves its own channel unserved until
// its next kick or the sleep's timeout, kickTimeout, after which the
// engine looks again.

// What it costs the daemon's other goroutines. An engine goroutine in
// futex_waitv is in a blocking system call, and keeps its P — the Go
// runtime's right to run Go code — until the runtime's monitor (sysmon)
// sees it blocked and hands the P to another thread: after 20 µs at the
// soonest, and up to its 10 ms back-off in a process that has been quiet.
// With two engines asleep on a two-core GOMAXPROCS, the daemon's socket
// goroutines may wait that long to run a control call; the data path does
// not pass through them. On waking, the engine gets its P back if nobody
// took it, or an idle one; only a daemon whose every P is busy makes it
// queue. That is the price of having the client's system call land on the
// engine itself, and the reason an in-process device keeps parking its
// engines on a channel (park).

// kickTimeout bounds one futex sleep of an engine: the look at the rings
// a doorbell stored a multiple of 2^32 past its tail would otherwise
// wait for. Long, since every legitimate path wakes the engine at once.
const kickTimeout = time.Second

// kick is an engine's half of the kick: its word, and the scratch its
// sleep fills.
type kick struct {
	word    atomic.Uint64 // written by WakeEngine (any goroutine of the daemon), read by the engine and the kernel
	waiters []futex.Waiter
	scratch futex.Scratch
}

// ErrNoWaitv reports a kernel without futex_waitv (Linux 5.16), which
// the engines of a shared device sleep in.
var ErrNoWaitv = errors.New("softgpu: the kernel has no futex_waitv, which a shared device's engines sleep in")

// checkWaitv makes sure the kernel has futex_waitv, before any engine
// needs it: a wait on a word that does not hold its Seen returns at once.
func checkWaitv() error {
	var w atomic.Uint64
	_, err := futex.WaitAny([]futex.Waiter{{Word: &w, Seen: 1, Private: true}}, futex.NewScratch(1), time.Second)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoWaitv, err)
	}
	return nil
}

// ANCHOR: armkick

// armKick is L1 of the handshake: it loads the kick word, after S1 (the
// store of RegNeedWakeup) and before L2 (the re-check, anyWork), and
// returns what park sleeps on.
func (e *Engine) armKick() uint64 { return e.kick.word.Load() }

// ANCHOR_END: armkick

// ANCHOR: park

// park blocks the engine until it is woken: in-process, until a token
// arrives on e.wakeup; on a shared device, until its kick word moves from
// armed or one of its client channels' doorbells from the tail the engine
// last accepted — W of the handshake above. Either may return for
// nothing (a stale token, a wake-up of a doorbell that did not move): the
// engine then finds no work and idles again.
func (e *Engine) park(armed uint64) {
	if e.dev.shm == nil {
		<-e.wakeup
		return
	}
	k := &e.kick
	if k.scratch.Len() == 0 {
		k.scratch = futex.NewScratch(1 + abi.MaxRunlist)
	}
	k.waiters = append(k.waiters[:0], futex.Waiter{Word: &k.word, Seen: armed, Private: true})
	for _, c := range e.list {
		if e.dev.shm.shared[c.id].Load() && !c.faulted {
			// Seen is the tail, not a fresh load of the doorbell: a
			// store since L2 must make the kernel's comparison fail.
			k.waiters = append(k.waiters, futex.Waiter{Word: e.regs.Word(c.doorbell + abi.RegDoorbell), Seen: c.tail})
		}
	}
	for {
		timedOut, err := futex.WaitAny(k.waiters, k.scratch, kickTimeout)
		if err != nil {
			// Open checked that futex_waitv exists (checkWaitv); every
			// word named is the device's own memory, and a runlist holds
			// at most MaxRunlist channels.
			panic(fmt.Sprintf("device: invariant broken: engine %d sleeping in futex_waitv: %v", e.id, err))
		}
		if !timedOut || e.anyWork() || e.stopRequested() {
			return
		}
	}
}

// ANCHOR_END: park

// kickEngine is WakeEngine on a shared device: the daemon's own wake
// (runlist submit, replay, Close, a Wake of a channel of its own). The add
// pairs with the engine's load in armKick (L1); the wake finds the engine
// queued in park, or the add has made its comparison fail.
func (eng *Engine) kickEngine() {
	eng.kick.word.Add(1)
	futex.WakePrivate(&eng.kick.word)
}
