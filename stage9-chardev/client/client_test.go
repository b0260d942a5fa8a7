package client_test

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
)

// serve starts a daemon on a node in a temporary directory, in this
// process (a goroutine), and closes it when the test ends.
func serve(t testing.TB, cfg server.Config) *server.Server {
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

// dial connects a client that is closed when the test ends.
func dial(t testing.TB, s *server.Server) *client.GPU {
	t.Helper()
	g, err := client.Dial(s.Node())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestAClientFillsAndReadsBack: the whole path once — negotiate, attach,
// open channels, allocate, fill on the device, read back through the
// staging buffer, write and read a pattern — with every byte checked.
func TestAClientFillsAndReadsBack(t *testing.T) {
	s := serve(t, server.Config{})
	g := dial(t, s)
	const size = 3<<20 + 123 // more than the staging buffer, not a whole page
	p, err := g.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Fill(p, size, 0x5a); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if err := g.Read(got, p); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0x5a }); i >= 0 {
		t.Fatalf("byte %d after Fill reads %#x; want 0x5a", i, got[i])
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>13)
	}
	if err := g.Write(p, want); err != nil {
		t.Fatal(err)
	}
	clear(got)
	if err := g.Read(got, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back differs from what was written")
	}
	if err := g.Free(p); err != nil {
		t.Fatal(err)
	}
}
