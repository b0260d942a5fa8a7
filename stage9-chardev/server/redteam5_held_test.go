package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRedTeam5DrainedSharesAreNotKept: the share's map (pagerBars.held)
// forgets a uid only when a charge of its own leaves its level at or
// below zero — which a call that took any time at all never does — so
// every uid that ever had a call made into its memory keeps an entry for
// the daemon's life, its share long drained. Ten thousand uids (a user's
// /etc/subuid range is 65536; root has 2^32) with one 1 µs call each,
// an hour ago: their shares are whole again, and the map should hold
// only the uid charged now.
func TestRedTeam5DrainedSharesAreNotKept(t *testing.T) {
	var b pagerBars
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	const uids = 10000
	for u := range uint32(uids) {
		b.charge(100000+u, t0, time.Microsecond)
	}
	for u := range uint32(uids) {
		assert.Equal(t, pagerBound, b.left(100000+u, t0.Add(time.Hour)), "uid %d's share an hour later", 100000+u)
	}
	b.charge(1000, t0.Add(time.Hour), time.Microsecond)
	assert.LessOrEqual(t, len(b.held), 1, "entries in the share's map an hour after %d uids' last calls, every one of their shares drained", uids)
}
