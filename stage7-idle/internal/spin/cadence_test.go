package spin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// fakeClock stands a clock the test moves in for now, for the test's life.
func fakeClock(t *testing.T) *int64 {
	t.Helper()
	var clock int64 = 1
	saved := now
	now = func() int64 { return clock }
	t.Cleanup(func() { now = saved })
	return &clock
}

// TestCadenceIsTime: with the clock standing still, no number of polls
// yields; a cadence counted in polls would.
func TestCadenceIsTime(t *testing.T) {
	fakeClock(t)
	c := NewCadence(0)
	for polls := 1; polls <= 1<<20; polls++ {
		if c.Due(polls) {
			t.Fatalf("Due(%d) = true with the clock standing still; want false", polls)
		}
	}
}

// TestCadenceYieldsAfter: once YieldAfter has passed since the spin began,
// the next check yields, and the interval starts again after the yield.
func TestCadenceYieldsAfter(t *testing.T) {
	clock := fakeClock(t)
	c := NewCadence(0)
	polls := 1
	for ; polls <= CheckEvery; polls++ { // the spin begins at the first check
		if c.Due(polls) {
			t.Fatalf("Due(%d) = true before any time passed", polls)
		}
	}
	*clock += int64(YieldAfter) - 1
	for ; polls <= 4*CheckEvery; polls++ {
		if c.Due(polls) {
			t.Fatalf("Due(%d) = true 1 ns before YieldAfter", polls)
		}
	}
	*clock++
	yieldedAt := 0
	for ; yieldedAt == 0; polls++ {
		if c.Due(polls) {
			yieldedAt = polls
		}
		if polls > 6*CheckEvery {
			t.Fatalf("no yield by poll %d, YieldAfter after the spin began", polls)
		}
	}
	assert.Equal(t, 0, yieldedAt%CheckEvery, "yielded at poll %d, not at a check (every %d polls)", yieldedAt, CheckEvery)
	// The yield took a long time; that is not spinning, so the next
	// interval starts at the next check, not at the yield.
	*clock += 10 * int64(YieldAfter)
	for end := polls + 2*CheckEvery; polls < end; polls++ {
		if c.Due(polls) {
			t.Fatalf("Due(%d) = true right after a yield, with no time spun since", polls)
		}
	}
	*clock += int64(YieldAfter)
	for end := polls + CheckEvery; polls < end; polls++ {
		if c.Due(polls) {
			return
		}
	}
	t.Errorf("no second yield YieldAfter after the first")
}

// TestCadenceCounted: a YieldEvery count keeps the old meaning.
func TestCadenceCounted(t *testing.T) {
	fakeClock(t)
	tests := []struct {
		every int
		polls int
		want  int // yields in polls 1..polls
	}{
		{every: 1, polls: 100, want: 100},
		{every: 64, polls: 640, want: 10},
		{every: 1000, polls: 999, want: 0},
		{every: -1, polls: 1 << 16, want: 0},
	}
	for _, tt := range tests {
		c := NewCadence(tt.every)
		got := 0
		for polls := 1; polls <= tt.polls; polls++ {
			if c.Due(polls) {
				got++
			}
		}
		assert.Equal(t, tt.want, got, "NewCadence(%d): %d yields in %d polls", tt.every, got, tt.polls)
	}
}

// TestNowMoves: the real clock is monotonic and moves.
func TestNowMoves(t *testing.T) {
	a := now()
	time.Sleep(time.Millisecond)
	if b := now(); b-a < int64(time.Millisecond) {
		t.Errorf("now() moved %d ns across a 1 ms sleep", b-a)
	}
}

// TestIdleGivesWayAfter: an idle loop yields on the cadence until its spin
// has lasted GiveWayAfter, then after every poll; work (polls from 1
// again) puts it back on the cadence.
func TestIdleGivesWayAfter(t *testing.T) {
	clock := fakeClock(t)
	c := NewCadence(0)
	polls := 1
	for ; polls <= CheckEvery; polls++ { // the spin begins at the first check
		assert.False(t, c.Idle(polls), "Idle(%d) before any time passed", polls)
	}
	*clock += int64(GiveWayAfter) - 1
	yields := 0
	for end := polls + 4*CheckEvery; polls < end; polls++ {
		if c.Idle(polls) {
			yields++
		}
	}
	assert.LessOrEqual(t, yields, 1, "on the cadence 1 ns before GiveWayAfter: at most one yield in four checks with the clock standing still")
	*clock++
	for end := polls + CheckEvery; polls < end; polls++ {
		c.Idle(polls) // the check in here sees GiveWayAfter
	}
	for end := polls + 3*CheckEvery; polls < end; polls++ {
		assert.True(t, c.Idle(polls), "Idle(%d) after GiveWayAfter: want a yield at every poll", polls)
	}
	// Work: the loop counts from 1 again, on the cadence.
	for polls = 1; polls <= 4*CheckEvery; polls++ {
		assert.False(t, c.Idle(polls), "Idle(%d) in a new spin with the clock standing still", polls)
	}
}

// TestIdleCounted: with a count, Idle is Due.
func TestIdleCounted(t *testing.T) {
	fakeClock(t)
	for _, every := range []int{1, 64, -1} {
		a, b := NewCadence(every), NewCadence(every)
		for polls := 1; polls <= 1024; polls++ {
			assert.Equal(t, a.Due(polls), b.Idle(polls), "every=%d, poll %d", every, polls)
		}
	}
}
