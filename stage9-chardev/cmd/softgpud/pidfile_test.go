package main

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestThePidFileIsNeverSeenHalfWritten: `softgpud -stop` may read the pid
// file at any moment after the daemon starts, so a reader must find the
// file absent or naming the daemon, never empty or part-written. The
// daemon writes it once; the test writes it many times, so that a reader
// polling beside it meets every moment of a write.
func TestThePidFileIsNeverSeenHalfWritten(t *testing.T) {
	node := filepath.Join(t.TempDir(), "card0")
	require.NoError(t, writePid(node))
	var done atomic.Bool
	writes := make(chan error, 1)
	go func() {
		defer done.Store(true)
		for range 500 {
			if err := writePid(node); err != nil {
				writes <- err
				return
			}
		}
		writes <- nil
	}()
	reads := 0
	for !done.Load() {
		pid, err := readPid(node)
		require.NoError(t, err, "readPid after %d reads, while the file is rewritten", reads)
		require.Equal(t, os.Getpid(), pid, "readPid after %d reads", reads)
		reads++
	}
	require.NoError(t, <-writes, "writePid")
	entries, err := os.ReadDir(filepath.Dir(node))
	require.NoError(t, err)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"card0.pid"}, names, "files beside the node after the writes: a temporary file left behind")
}
