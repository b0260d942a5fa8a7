package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestDrainedSharesAreNotKept: the share's map (pagerBars.held) once
// forgot a uid only when a charge of its own left its level at or below
// zero — which a call that took any time at all never does — so every
// uid that ever had a call made into its memory kept an entry for the
// daemon's life, its share long drained (a user's /etc/subuid range is
// 65536 uids; root has 2^32). Now a charge prunes the drained shares, and
// the bars past their doubling window, whenever the maps have doubled
// since the last prune: a sweep costs each charge O(1), and the maps hold
// at most about twice the uids whose shares are not drained. Here ten
// thousand uids with one 1 µs call each, then, an hour later, ten
// thousand others: the first ten thousand are gone.
func TestDrainedSharesAreNotKept(t *testing.T) {
	var b pagerBars
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	const uids = 10000
	for u := range uint32(uids) {
		b.charge(100000+u, t0, time.Microsecond)
	}
	for u := range uint32(uids) {
		assert.Equal(t, pagerBound, b.left(100000+u, t0.Add(time.Hour)), "uid %d's share an hour later", 100000+u)
	}
	for u := range uint32(uids) {
		b.charge(200000+u, t0.Add(time.Hour), time.Microsecond)
	}
	assert.LessOrEqual(t, len(b.held), uids+pruneAbove, "entries in the share's map after %d uids an hour ago and %d now", uids, uids)
	for u := range uint32(100) {
		_, kept := b.held[100000+u]
		assert.False(t, kept, "uid %d's share, drained an hour ago, is still kept", 100000+u)
	}
}
