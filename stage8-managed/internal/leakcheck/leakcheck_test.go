package leakcheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func parked(stop <-chan struct{}) { <-stop }

func TestRunningSeesAGoroutineUntilItReturns(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { parked(stop); close(done) }()
	time.Sleep(time.Millisecond) // let it reach parked; checked below either way
	require.Eventually(t, func() bool { return len(Running()) != 0 }, 5*time.Second, time.Millisecond,
		"Running did not report a goroutine blocked in leakcheck.parked")
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
	require.Eventually(t, func() bool { return len(RunningIn("leakcheck.parked")) != 0 }, 5*time.Second, time.Millisecond,
		"RunningIn(leakcheck.parked) did not report the goroutine blocked there")
	if got := RunningIn("leakcheck.elsewhere"); len(got) != 0 {
		t.Errorf("RunningIn(leakcheck.elsewhere) = %q; want none", got)
	}
}
