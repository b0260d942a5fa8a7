package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/server"
)

// A punch helper that never works. A daemon whose helper
// binary exits at once (here a script that counts its starts and exits)
// still lets MANAGED_PAGER succeed — ready() only starts the helper —
// and then every Remove fails: the run is restored (restoreHost) and
// mapped remotely. A paged client must still read every byte right, just
// slower. The test also counts the helpers the daemon starts: with no
// idle helper left (each dead one is lost), every punch starts another;
// but a failed move maps its run remotely, pinned there for the
// thrashing guard's pin, so the pages stop moving and the helpers stop
// starting (2 in a run of the test): no fork-and-exec storm.

// TestAPagedClientWithADeadHelperLosesNoBytes: the "pager" role
// (host and device writes interleaved against a model, byte for byte,
// with the client's collector running without pause), seeds 0 and 7,
// against a daemon whose every helper exits at once.
func TestAPagedClientWithADeadHelperLosesNoBytes(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "spawns")
	helper := filepath.Join(dir, "dead-helper")
	require.NoError(t, os.WriteFile(helper, []byte(fmt.Sprintf("#!/bin/sh\necho x >> %q\nexit 0\n", count)), 0o755))
	s := serve(t, server.Config{})
	server.SetPunchHelperExe(s, helper)
	start := time.Now()
	for _, seed := range []int{0, 7} {
		startChild(t, "pager", s.Node(), seed, 3).succeed(t)
	}
	took := time.Since(start)
	st := s.ManagedStats()
	data, _ := os.ReadFile(count)
	spawns := strings.Count(string(data), "x")
	t.Logf("two pager clients in %v: pager errors %d, host faults %d, to device %d, thrashing %d; helpers started %d (%.0f/s)",
		took.Round(time.Millisecond), st.PagerErrors, st.HostFaults, st.ToDevice, st.Thrashing, spawns, float64(spawns)/took.Seconds())
	assert.NotZero(t, st.PagerErrors, "no Remove failed: the dead helper was never asked")
}
