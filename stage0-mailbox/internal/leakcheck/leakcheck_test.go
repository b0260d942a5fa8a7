package leakcheck

import (
	"testing"
	"time"
)

func parked(stop <-chan struct{}) { <-stop }

func TestRunningSeesAGoroutineUntilItReturns(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { parked(stop); close(done) }()
	time.Sleep(time.Millisecond) // let it reach parked; checked below either way
	deadline := time.Now().Add(5 * time.Second)
	for len(Running()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Running did not report a goroutine blocked in leakcheck.parked")
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	<-done
	if got := Running(); len(got) != 0 {
		t.Errorf("Running after the goroutine returned = %q; want none", got)
	}
}
