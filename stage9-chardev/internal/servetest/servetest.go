// Package servetest starts a daemon in a test's own process, for the
// tests of every package that talks to one (client, server, softgpu-smi,
// the C client).
package servetest

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"softgpu/stage9-chardev/server"
)

// Serve starts a daemon on a node in a temporary directory, served by a
// goroutine of this process, with 16 MiB of device memory and a silent
// log unless cfg says otherwise, and closes it when the test ends —
// failing the test if closing or serving went wrong.
func Serve(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Node == "" {
		cfg.Node = filepath.Join(t.TempDir(), "card0")
	}
	if cfg.Device.MemorySize == 0 {
		cfg.Device.MemorySize = 16 << 20
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the daemon: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}
