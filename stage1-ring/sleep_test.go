package softgpu_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSleepForLeavesTheTimerSlack: sleepFor sets its thread's timer slack
// to 1 ns for the sleep, and must give the thread its own slack back. A
// thread keeps its slack after sleepFor unlocks it: it goes on to run other
// goroutines, and the threads the runtime creates from it, and the
// processes a benchmark starts from it, inherit it.
func TestSleepForLeavesTheTimerSlack(t *testing.T) {
	runtime.LockOSThread() // sleepFor's LockOSThread nests: it sleeps on this thread
	defer runtime.UnlockOSThread()
	require.NoError(t, unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0)) // 0: the thread's default
	before, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	require.NoError(t, err)
	require.Greater(t, before, 1, "the default timer slack is already 1 ns here: this test cannot tell")

	sleepFor(100 * time.Microsecond)

	after, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, before, after, "sleepFor left its thread's timer slack at %d ns", after)
}
