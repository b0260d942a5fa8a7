package server

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
)

// TestTheDaemonsEnginesSpinForAKick: left to its defaults, the daemon
// programs every engine with its own budget (DefaultIdleBudget), not the
// in-process device's; an Idle the caller chose is kept as it is.
func TestTheDaemonsEnginesSpinForAKick(t *testing.T) {
	for _, c := range []struct {
		name       string
		idle       driver.Idle
		mode, want uint64
	}{
		{"default", driver.Idle{}, uint64(abi.IdleHybrid), DefaultIdleBudget},
		{"chosen", driver.Idle{Mode: driver.IdleHybrid, Budget: 30_000}, uint64(abi.IdleHybrid), 30_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Node: filepath.Join(t.TempDir(), "card0"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cfg.Device.MemorySize = 1 << 20
			cfg.Driver.Idle = c.idle
			s, err := New(cfg)
			require.NoError(t, err)
			defer s.Close()
			regs := s.dev.Registers()
			for e := range abi.Engine(abi.NumEngines) {
				page := abi.EngineControlPage(e)
				if mode, budget := regs.Load(page+abi.RegIdleMode), regs.Load(page+abi.RegIdleBudget); mode != c.mode || budget != c.want {
					t.Errorf("engine %d: idle mode %d, budget %d; want %d, %d", e, mode, budget, c.mode, c.want)
				}
			}
		})
	}
}
