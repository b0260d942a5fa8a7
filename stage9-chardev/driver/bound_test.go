package driver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSpinBoundedLooksOnceMoreAtItsDeadline: a waiter kept off its core
// past its deadline — a loaded machine can hold a goroutine for a second —
// must not report a timeout for a condition that came true meanwhile. The
// condition here comes true on the 65th look, just after the deadline
// (already past) is first read at the 64th: the wait must take one more
// look, and return nil. A condition that never comes true still times out.
func TestSpinBoundedLooksOnceMoreAtItsDeadline(t *testing.T) {
	looks := 0
	err := spinBounded(func() bool { looks++; return looks > 64 }, time.Nanosecond)
	assert.NoError(t, err, "spinBounded, the condition true at the look after the deadline was read (%d looks)", looks)

	err = spinBounded(func() bool { return false }, time.Millisecond)
	assert.ErrorIs(t, err, ErrTimeout, "spinBounded on a condition that is never true")
}
