package softgpu_test

import (
	"errors"
	"testing"
	"time"

	softgpu "softgpu/stage7-idle"
	"softgpu/stage7-idle/driver"
	"softgpu/stage7-idle/internal/leakcheck"
)

// TestEveryIdleModeRuns opens a device in each idle mode and runs fills with
// gaps that a hybrid engine sleeps through and gaps it spins through,
// switching the mode of one engine at run time as it goes.
func TestEveryIdleModeRuns(t *testing.T) {
	modes := []struct {
		name   string
		mode   softgpu.IdleMode
		budget uint64
	}{{"hybrid50us", softgpu.IdleHybrid, 0}, {"hybrid1us", softgpu.IdleHybrid, 1_000}, {"spin", softgpu.IdleSpin, 0}, {"sleep", softgpu.IdleSleep, 0}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			leakcheck.Check(t)
			g, err := softgpu.Open(softgpu.Config{MemorySize: 1 << 20, Idle: m.mode, IdleBudget: m.budget})
			if err != nil {
				t.Fatal(err)
			}
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
	if err := g.SetIdle(softgpu.Copy, softgpu.IdleSleep+1, 0); !errors.Is(err, driver.ErrIdleMode) {
		t.Errorf("SetIdle(mode %d) = %v; want ErrIdleMode", softgpu.IdleSleep+1, err)
	}
}
