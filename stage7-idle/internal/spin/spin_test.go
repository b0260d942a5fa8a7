package spin

import (
	"testing"
	"time"
)

// TestThreadAfterIsTime: a yield gives up the thread once the spin has gone
// on for ThreadAfter, however few or many polls that took.
func TestThreadAfterIsTime(t *testing.T) {
	clock := fakeClock(t)
	c := NewCadence(0)
	polls := 1
	// yieldAt advances the clock by d, then polls until the cadence is due
	// and reports whether that yield gives up the thread.
	yieldAt := func(d time.Duration) bool {
		t.Helper()
		*clock += int64(d)
		for end := polls + 2*CheckEvery; polls < end; polls++ {
			if c.Due(polls) {
				polls++
				return c.threadDue(polls - 1)
			}
		}
		t.Fatalf("no yield within %d polls of %v passing", 2*CheckEvery, d)
		return false
	}
	for ; polls <= CheckEvery; polls++ { // the spin begins at the first check
		c.Due(polls)
	}
	if yieldAt(YieldAfter) {
		t.Errorf("the first yield, %v into the spin, gives up the thread; want it only after %v", YieldAfter, ThreadAfter)
	}
	for polls%CheckEvery != 0 { // the next check starts the next interval
		polls++
	}
	c.Due(polls)
	polls++
	if !yieldAt(ThreadAfter) {
		t.Errorf("a yield %v into the spin does not give up the thread; want it to after %v", YieldAfter+ThreadAfter, ThreadAfter)
	}
	if ThreadAfterPolls <= polls {
		t.Fatalf("test spun %d polls, not fewer than ThreadAfterPolls: it cannot tell time from a count", polls)
	}
}

// TestThreadAfterCounted: a counted cadence keeps the count's rule.
func TestThreadAfterCounted(t *testing.T) {
	fakeClock(t)
	c := NewCadence(64)
	for _, tc := range []struct {
		polls int
		want  bool
	}{{64, false}, {192, false}, {256, true}, {1024, true}} {
		if got := c.threadDue(tc.polls); got != tc.want {
			t.Errorf("NewCadence(64).threadDue(%d) = %v; want %v", tc.polls, got, tc.want)
		}
	}
}
