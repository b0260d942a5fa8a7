package softgpu_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage8-managed"
	"softgpu/stage8-managed/internal/leakcheck"
)

// TestEveryIdleModeRuns opens a device in each idle mode and runs fills with
// gaps that a hybrid engine sleeps through and gaps it spins through,
// switching the mode of one engine at run time as it goes.
func TestEveryIdleModeRuns(t *testing.T) {
	modes := []struct {
		name   string
		mode   softgpu.IdleMode
		budget uint64
	}{{"hybrid50us", softgpu.IdleHybrid, 0}, {"hybrid1us", softgpu.IdleHybrid, 1_000}, {"spin", softgpu.IdleSpin, 0},
		{"sleep", softgpu.IdleSleep, 0}, {"adaptive", softgpu.IdleAdaptive, 0}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			leakcheck.Check(t)
			g, err := softgpu.Open(softgpu.Config{MemorySize: 1 << 20, Idle: m.mode, IdleBudget: m.budget})
			require.NoError(t, err)
			defer g.Close()
			p := mustAlloc(t, g, 64)
			for i, gap := range []time.Duration{0, 100 * time.Microsecond, 0, 2 * time.Millisecond, 0} {
				time.Sleep(gap)
				must(t, g.Fill(p, 64, byte(i)))
				must(t, g.Sum32(p, p, 0)) // the compute engine, which was idle meanwhile
				next := modes[(i+1)%len(modes)]
				must(t, g.SetIdle(softgpu.Compute, next.mode, next.budget))
			}
		})
	}
}

func TestSetIdleRejectsAnUnknownMode(t *testing.T) {
	g := openTest(t)
	assert.ErrorIs(t, g.SetIdle(softgpu.Copy, softgpu.IdleAdaptive+1, 0), softgpu.ErrConfig, "SetIdle(mode %d)", softgpu.IdleAdaptive+1)
	_, err := softgpu.Open(softgpu.Config{Idle: 7})
	assert.ErrorIs(t, err, softgpu.ErrConfig, "Open with idle mode 7")
}

// TestTraceShowsTheSleepAndTheWake traces a fill after a gap an engine in
// sleep mode sleeps through: the copy engine's track must show it asleep,
// with the wake latency, and the fill after the sleep ends. The gap starts
// once the engine says it is asleep, not when the first fill returns: an
// engine kept off a core for the gap's length between its completion and
// its sleep (a loaded machine) would otherwise sleep through little or
// none of it, and the trace would rightly show no such sleep.
func TestTraceShowsTheSleepAndTheWake(t *testing.T) {
	leakcheck.Check(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	g, asleep, err := softgpu.OpenWatched(softgpu.Config{MemorySize: 1 << 20, Idle: softgpu.IdleSleep, Trace: path})
	require.NoError(t, err)
	p := mustAlloc(t, g, 64)
	must(t, g.Fill(p, 64, 1))
	require.Eventually(t, func() bool { return asleep(softgpu.Copy) }, 10*time.Second, 50*time.Microsecond,
		"after 10 s: the copy engine asleep after a fill, in sleep mode")
	time.Sleep(5 * time.Millisecond)
	must(t, g.Fill(p, 64, 2))
	must(t, g.Close())
	events := readTrace(t, path)
	const copyTrack = 1 + int(softgpu.Copy)
	var sleepEnd float64
	found := false
	for _, ev := range events {
		if ev.Tid != copyTrack {
			continue
		}
		switch {
		case ev.Name == "sleep" && ev.Dur > 1000 && ev.Args["wake_ns"] != nil: // the 5 ms gap, ended by a wake call
			sleepEnd = ev.Ts + ev.Dur
		case ev.Name == "FILL" && sleepEnd > 0 && ev.Ts >= sleepEnd:
			found = true
		}
	}
	if !found {
		t.Errorf("no sleep of the gap, woken by a call, followed by the FILL on the copy engine's track, among the trace's %d events", len(events))
	}
}
