package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHangBarsDoubleOnlyForANewIncident: a uid's first strike bars it for
// hangBarFirst; a strike while barred is the same incident and changes
// nothing; one within the bar's length after it ended doubles it, up to
// hangBarMost; one long after starts again at hangBarFirst.
func TestHangBarsDoubleOnlyForANewIncident(t *testing.T) {
	var b hangBars
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	const uid = 65534
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	strike := func(now time.Time) (time.Duration, bool) {
		until, began := b.strike(uid, now)
		return until.Sub(now), began
	}

	length, began := strike(at(0))
	assert.True(t, began, "the first strike begins a bar")
	assert.Equal(t, hangBarFirst, length, "the first strike's bar")
	_, barred := b.barred(uid, at(hangBarFirst-time.Second))
	assert.True(t, barred, "barred a second before the bar ends")
	_, other := b.barred(uid+1, at(0))
	assert.False(t, other, "another uid is not barred")

	// The other engine's SPIN of the same round is reset a moment later.
	length, began = strike(at(time.Second))
	assert.False(t, began, "a strike while barred")
	assert.Equal(t, hangBarFirst-time.Second, length, "a strike while barred leaves the bar as it was")

	// Within the bar's length after it ended: doubled.
	now := hangBarFirst + time.Second
	_, barred = b.barred(uid, at(now))
	assert.False(t, barred, "barred after the bar ended")
	length, began = strike(at(now))
	assert.True(t, began, "a strike after the bar ended")
	assert.Equal(t, 2*hangBarFirst, length, "a strike within the bar's length after its end")

	// Long after: hangBarFirst again.
	length, _ = strike(at(10 * time.Hour))
	assert.Equal(t, hangBarFirst, length, "a strike long after")

	// The length stops at hangBarMost.
	now = 10*time.Hour + hangBarFirst
	for range 20 {
		length, _ = strike(at(now))
		now += length
	}
	assert.Equal(t, hangBarMost, length, "after many strikes, each as the last bar ended")
}

// TestHangBarsForgetWhatHasRunItsCourse: the bars of uids whose bar has
// ended, and its length again passed, are forgotten once the map has grown
// past pruneAbove, so that a stranger with a range of uids cannot grow it
// without bound.
func TestHangBarsForgetWhatHasRunItsCourse(t *testing.T) {
	var b hangBars
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for uid := range uint32(pruneAbove + 1) {
		b.strike(uid, t0) // the last prunes, and finds nothing to forget
	}
	later := t0.Add(time.Hour)
	for uid := uint32(1000); uid < 1000+pruneAbove+2; uid++ {
		b.strike(uid, later) // the last takes the map past twice what the first prune left
	}
	assert.Len(t, b.byUID, pruneAbove+2, "bars kept: only the later uids'")
	_, kept := b.byUID[0]
	assert.False(t, kept, "the bar of a uid struck an hour before")
}
