package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPagerBarsDoubleOnlyForANewIncident: a uid's first strike bars it
// for barFirst. Calls that were already stuck when the bar began are the
// same incident, and strike without lengthening it; a call begun during
// the bar, or within the bar's length after it ended, doubles it, up to
// barMost; a strike long after starts again at barFirst.
func TestPagerBarsDoubleOnlyForANewIncident(t *testing.T) {
	var b pagerBars
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	const uid = 1000
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	barredFor := func(now time.Time) time.Duration {
		until, barred := b.barred(uid, now)
		if !barred {
			return 0
		}
		return until.Sub(now)
	}

	assert.Equal(t, at(barFirst), b.strike(uid, at(0), at(-pagerBound)), "the first strike")
	assert.Equal(t, barFirst, barredFor(at(0)))
	_, other := b.barred(uid+1, at(0))
	assert.False(t, other, "another uid is not barred")

	// Two more calls of the uid's, stuck since before the bar began, time
	// out just after it: the same incident.
	assert.Equal(t, at(barFirst), b.strike(uid, at(time.Millisecond), at(-time.Millisecond)), "a call stuck before the bar")
	assert.Equal(t, at(barFirst), b.strike(uid, at(2*time.Millisecond), at(-pagerBound/2)), "another call stuck before the bar")

	// A call begun after the bar began — it passed the barred check just
	// before — is a new incident.
	assert.Equal(t, at(time.Second+2*barFirst), b.strike(uid, at(time.Second), at(time.Second-pagerBound)), "a call begun during the bar")

	// Within the bar's length after it ends: doubled again.
	end := time.Second + 2*barFirst
	assert.Equal(t, at(end+barFirst+4*barFirst), b.strike(uid, at(end+barFirst), at(end+barFirst-pagerBound)), "a strike within the bar's length after its end")

	// Long after: barFirst again.
	later := 10 * time.Hour
	assert.Equal(t, at(later+barFirst), b.strike(uid, at(later), at(later-pagerBound)), "a strike long after")

	// The length stops at barMost.
	now := later
	for range 20 {
		now += time.Second
		b.strike(uid, at(now), at(now-pagerBound))
	}
	assert.Equal(t, barMost, barredFor(at(now)), "after many strikes")
}

// TestAUidsShareOfThePagerDrains: the time a uid's calls take fills its
// share, which drains at a shareLeak-th of the time. Calls of 15 ms back
// to back spend it at the seventh (105 ms against pagerBound); the same
// calls far enough apart that 20 ms drains between them never do; one uid's
// calls leave another's share whole; and a second after, it is whole
// again.
func TestAUidsShareOfThePagerDrains(t *testing.T) {
	var b pagerBars
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	const stranger, other = 65534, 1000
	for k := 1; k <= 6; k++ {
		assert.False(t, b.charge(stranger, t0, 15*time.Millisecond), "call %d of 15 ms, back to back", k)
	}
	assert.Equal(t, 10*time.Millisecond, b.left(stranger, t0), "left after six calls of 15 ms")
	assert.True(t, b.charge(stranger, t0, 15*time.Millisecond), "the seventh call of 15 ms, back to back")
	assert.Equal(t, pagerBound, b.left(other, t0), "another uid's share")
	assert.Equal(t, pagerBound, b.left(stranger, t0.Add(time.Duration(shareLeak)*105*time.Millisecond)), "the stranger's share once 105 ms have drained")

	now, gap := t0.Add(time.Hour), time.Duration(shareLeak)*20*time.Millisecond // 20 ms drains in a gap
	for k := range 100 {
		assert.False(t, b.charge(other, now, 15*time.Millisecond), "call %d of 15 ms, %v after the last", k, gap)
		now = now.Add(gap)
	}
}

// TestACallMayTakeOnlyWhatIsLeftOfItsShare: with 90 ms of its uid's
// share spent, a call that waits 50 ms is judged at 10 ms — the client
// dropped, the uid barred — though no single call came near pagerBound.
func TestACallMayTakeOnlyWhatIsLeftOfItsShare(t *testing.T) {
	var why string
	p := &pager{uid: 65534, bars: &pagerBars{}, drop: func(w string) { why = w }}
	p.bars.charge(p.uid, time.Now(), 90*time.Millisecond)
	err := p.bounded(pagerCall{op: "a slow call of", page: 0, pages: 1}, func(int, int) error {
		time.Sleep(50 * time.Millisecond)
		return nil
	})
	assert.ErrorIs(t, err, errStuck)
	assert.Contains(t, why, "what was left of its uid's share", "why the client was dropped")
	_, barred := p.bars.barred(p.uid, time.Now())
	assert.True(t, barred, "the uid barred")
}
