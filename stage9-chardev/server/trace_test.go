package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
)

// TestTheDaemonTracesItsClients: a daemon started with a trace file writes
// it when it closes, and the trace shows a client's life on the driver's
// track — its attach, with its pid and context, then its commands on an
// engine, then its detach (the teardown, with a duration) — in that order.
func TestTheDaemonTracesItsClients(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "daemon.json")
	s, err := server.New(server.Config{Node: filepath.Join(dir, "card0"), Device: deviceConfig(16 << 20),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Trace: path})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	g, err := client.Dial(s.Node())
	require.NoError(t, err)
	p, err := g.Alloc(4096)
	require.NoError(t, err)
	require.NoError(t, g.Fill(p, 4096, 0x5a))
	require.NoError(t, g.Close())
	require.NoError(t, s.Close())
	require.NoError(t, <-served)
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the daemon wrote no trace")
	var f struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &f), "the trace is not JSON")
	pid := any(float64(os.Getpid()))
	attach, fill, detach := -1.0, -1.0, -1.0
	for _, ev := range f.TraceEvents {
		switch {
		case ev.Name == "client attach" && ev.Args["pid"] == pid:
			attach = ev.Ts
		case ev.Name == "FILL" && ev.Ph == "X":
			fill = ev.Ts
		case ev.Name == "client detach" && ev.Args["pid"] == pid:
			detach = ev.Ts
			if ev.Dur <= 0 {
				t.Errorf("the detach lasted %v µs; want the teardown's time", ev.Dur)
			}
		}
	}
	if attach < 0 || fill < 0 || detach < 0 {
		t.Fatalf("trace has attach at %v, a FILL at %v, detach at %v (µs; -1: missing); want all three", attach, fill, detach)
	}
	if !(attach <= fill && fill <= detach) {
		t.Errorf("attach at %v µs, FILL at %v, detach at %v; want them in that order", attach, fill, detach)
	}
}
