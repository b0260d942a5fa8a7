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

func TestRunningInNamesTheFunction(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { parked(stop); close(done) }()
	defer func() { close(stop); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for len(RunningIn("leakcheck.parked")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("RunningIn(leakcheck.parked) did not report the goroutine blocked there")
		}
		time.Sleep(time.Millisecond)
	}
	if got := RunningIn("leakcheck.elsewhere"); len(got) != 0 {
		t.Errorf("RunningIn(leakcheck.elsewhere) = %q; want none", got)
	}
}
