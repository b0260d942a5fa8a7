package leakcheck

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that keeps the cleanups and errors given to it,
// so that a test can run the cleanups in testing's order (the last
// registered first) and see what Check reported.
type recorder struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A test that opens two devices calls Check twice: every helper that opens
// one calls it first. Cleanups run last-registered first, so a check
// registered by the second call would run after the second device closed
// but before the first one did, and report the first device's goroutines
// as leaked (it did: TestARemovedChannelIsDrained, when a loaded machine
// made it open a second device). Only the first call's check may run.
func TestCheckCalledTwiceWaitsForEveryCleanup(t *testing.T) {
	r := &recorder{TB: t}
	start := func() {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { parked(stop); close(done) }()
		r.Cleanup(func() { close(stop); <-done }) // the device's Close
	}
	Check(r)
	start()
	Check(r)
	start()
	r.runCleanups()
	require.Empty(t, r.errors, "Check reported a goroutine that a cleanup registered before its second call stops")
}
