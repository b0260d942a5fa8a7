package futex

import (
	"sync/atomic"
	"testing"
	"time"
)

// A sleeper on an unchanged word stays asleep until Wake: it must not
// return before the store that precedes the wake.
func TestWakeEndsWait(t *testing.T) {
	var w atomic.Uint64
	w.Store(7)
	var stored atomic.Bool
	done := make(chan bool)
	go func() {
		for w.Load() == 7 {
			Wait(&w, 7, 10*time.Second)
		}
		done <- stored.Load()
	}()
	time.Sleep(20 * time.Millisecond) // let it sleep
	stored.Store(true)
	w.Store(8)
	Wake(&w)
	select {
	case sawStore := <-done:
		if !sawStore {
			t.Fatal("the waiter returned before the store")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not end the Wait")
	}
}

// A word that no longer holds what the caller saw does not sleep — the
// check the lost-wake-up argument rests on — and only the low half is
// compared.
func TestWaitComparesTheLowHalf(t *testing.T) {
	var w atomic.Uint64
	w.Store(5)
	if Wait(&w, 4, 10*time.Second) { // differs: returns at once
		t.Fatal("Wait on a changed word slept out its timeout")
	}
	w.Store(1<<32 + 5)
	start := time.Now()
	if !Wait(&w, 5, 50*time.Millisecond) { // the low halves agree: sleeps out the timeout
		t.Fatalf("Wait returned after %v without timing out; the low halves are equal, so it should sleep", time.Since(start))
	}
}
