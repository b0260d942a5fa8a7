package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
)

// dialBlocking connects a client whose every wait blocks at once: each
// sleeps on its channel's fence word (driver/client.go, sleep) until the
// engine's vector wakes it.
func dialBlocking(t *testing.T) *GPU {
	t.Helper()
	s := servetest.Serve(t, server.Config{})
	g, err := DialConfig(Config{Node: s.Node(), Wait: driver.WaitBlock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestBlockedWaitersAreWokenByTheirFences: waiters in several goroutines
// sleep on one channel's fence word for fences the engine reaches one
// after another. Every wait must end with its fence, and by a wake, not by
// the sleep's timeout: a lost wake-up — a vector that wakes the wrong
// word, a waiter that sleeps after the fence moved, remaining waiters left
// unarmed — would end each of those sleeps only at the timeout, which the
// client counts. (A stalled machine may make a wake late now and then;
// a lost one makes every sleep time out.)
func TestBlockedWaitersAreWokenByTheirFences(t *testing.T) {
	g := dialBlocking(t)
	const size = 256 << 10
	buf, err := g.Alloc(4 * size)
	if err != nil {
		t.Fatal(err)
	}
	const rounds, waiters = 50, 4
	for r := range rounds {
		pending := make([]*driver.Pending, waiters)
		for i := range pending {
			// A quarter of a MiB each: tens of microseconds of copying,
			// long enough that every waiter is asleep before its fence.
			if pending[i], err = g.FillAsync(buf+Ptr(i*size), size, byte(r+i)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, waiters)
		for i := waiters - 1; i >= 0; i-- { // the latest fence first: the others' waiters arm below it
			wg.Go(func() { errs[i] = pending[i].Wait() })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	got := make([]byte, 4*size)
	if err := g.Read(got, buf); err != nil {
		t.Fatal(err)
	}
	for i := range waiters {
		if b := got[i*size+size-1]; b != byte(rounds-1+i) {
			t.Fatalf("fill %d of the last round left %#x; want %#x", i, b, byte(rounds-1+i))
		}
	}
	st := g.cl.Stats()
	t.Logf("wake-ups %d (futile %d), sleeps that timed out %d", st.Wakeups, st.FutileWakeups, st.SleepTimeouts)
	if st.Wakeups < rounds {
		t.Fatalf("%d wake-ups in %d rounds of blocked waits: the waiters did not sleep", st.Wakeups, rounds)
	}
	if st.SleepTimeouts*4 > st.Wakeups {
		t.Fatalf("%d of %d sleeps ended at their timeout, not woken by the engine", st.SleepTimeouts, st.Wakeups)
	}
}

// TestASleepingWaitEndsWithItsContext: a waiter asleep on a fence the
// engine will not reach for seconds returns its context's error when the
// context ends, and the channel serves the next command as before.
func TestASleepingWaitEndsWithItsContext(t *testing.T) {
	g := dialBlocking(t)
	b := g.NewBatch(Copy)
	b.Delay(uint64(2 * time.Second))
	p, err := b.Submit()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait whose context ended returned %v; want %v", err, context.DeadlineExceeded)
	}
	if d := time.Since(start); d >= time.Second {
		t.Fatalf("the wait returned after %v, when the DELAY ended, not its context", d)
	}
	if err := p.Wait(); err != nil { // the DELAY, then
		t.Fatal(err)
	}
	if err := g.Nop(Copy); err != nil {
		t.Fatal(err)
	}
}
