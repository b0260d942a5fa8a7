//go:build amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64le || mipsle || mips64le

package futex

import (
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestWakeEndsWait: a sleeper on an unchanged word sleeps until Wake, and
// returns only after the store that precedes the wake.
func TestWakeEndsWait(t *testing.T) {
	var w atomic.Uint64
	w.Store(7)
	var stored atomic.Bool
	done := make(chan bool)
	go func() {
		timedOut := Wait(&w, 7, 10*time.Second) // once: a return before the store fails the test
		done <- stored.Load() && !timedOut
	}()
	time.Sleep(50 * time.Millisecond) // let it sleep
	stored.Store(true)
	w.Store(8)
	Wake(&w)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the waiter returned before the store, or at its timeout")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not end the Wait")
	}
}

// TestWaitComparesTheLowHalf: a word that no longer holds what the caller
// saw does not sleep — the check the lost-wake-up argument rests on — and
// only the low half is compared.
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

// TestTwoMappingsNameOneFutex is the premise of the client's waits: a
// thread asleep on a word in a read-only mapping of a memfd is woken by a
// Wake on the same word through another, read-write mapping of it — a
// shared futex is keyed by the file and the offset, not the address.
func TestTwoMappingsNameOneFutex(t *testing.T) {
	fd, err := unix.MemfdCreate("futex-test", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 4096))
	rw, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(rw)
	ro, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(ro)
	writer := (*atomic.Uint64)(unsafe.Pointer(&rw[64]))
	reader := (*atomic.Uint64)(unsafe.Pointer(&ro[64]))
	done := make(chan bool)
	go func() { done <- Wait(reader, 0, 10*time.Second) }()
	time.Sleep(50 * time.Millisecond) // let it sleep
	writer.Store(1)
	Wake(writer)
	select {
	case timedOut := <-done:
		if timedOut {
			t.Fatal("the sleeper on the read-only mapping slept out its timeout")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Wake through the read-write mapping did not reach the sleeper on the read-only one")
	}
}

// TestWaitAny: a sleep on several words ends at a Wake of any one of
// them; a word that no longer holds what the caller saw stops the sleep
// before it starts (the value check the engine's sleep rests on); and an
// unchanged set sleeps out its timeout.
func TestWaitAny(t *testing.T) {
	var a, b atomic.Uint64
	scratch := NewScratch(2)
	ws := []Waiter{{Word: &a, Seen: 0, Private: true}, {Word: &b, Seen: 0}}
	t.Run("wake of the second word", func(t *testing.T) {
		done := make(chan bool)
		go func() {
			timedOut, err := WaitAny(ws, NewScratch(2), 10*time.Second)
			done <- err == nil && !timedOut
		}()
		time.Sleep(50 * time.Millisecond) // let it sleep
		b.Store(1)
		Wake(&b)
		select {
		case ok := <-done:
			if !ok {
				t.Fatal("WaitAny failed or slept out its timeout")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a Wake of the second word did not end WaitAny")
		}
		b.Store(0)
	})
	t.Run("changed word", func(t *testing.T) {
		a.Store(3)
		defer a.Store(0)
		if timedOut, err := WaitAny(ws, scratch, 10*time.Second); err != nil || timedOut {
			t.Fatalf("WaitAny on a changed word = timedOut %v, %v; want an at-once return", timedOut, err)
		}
	})
	t.Run("unchanged words time out", func(t *testing.T) {
		if timedOut, err := WaitAny(ws, scratch, 20*time.Millisecond); err != nil || !timedOut {
			t.Fatalf("WaitAny on unchanged words = timedOut %v, %v; want a timeout", timedOut, err)
		}
	})
	t.Run("too many words", func(t *testing.T) {
		_, err := WaitAny(ws, NewScratch(1), time.Second)
		require.Error(t, err, "WaitAny with scratch for 1 of 2 words succeeded")
	})
}
