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
