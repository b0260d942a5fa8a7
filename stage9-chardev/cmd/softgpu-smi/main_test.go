package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/internal/leakcheck"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
)

// serve starts a daemon in this process for the rest of the test.
var serve = servetest.Serve

// control connects as softgpu-smi does, until the test ends.
func control(t testing.TB, node string) *client.Control {
	t.Helper()
	ctl, err := dial(node)
	require.NoError(t, err)
	t.Cleanup(func() { ctl.Close() })
	return ctl
}

// mustTake takes a sample or fails the test.
func mustTake(t testing.TB, ctl *client.Control, node string) sample {
	t.Helper()
	s, err := take(ctl, node)
	require.NoError(t, err)
	return s
}

// The work the test client does, and so what softgpu-smi must show of it.
const (
	deviceBytes = 1 << 20  // one Alloc
	hostBytes   = 64 << 10 // one HostAlloc, whole pages
)

// busyClient connects a client that allocates device memory, registers
// host memory and runs commands on the copy engine. It is closed when the
// test ends, if the test has not closed it first.
func busyClient(t testing.TB, s *server.Server) *client.GPU {
	t.Helper()
	g, err := client.Dial(s.Node())
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	p, err := g.Alloc(deviceBytes)
	require.NoError(t, err)
	h, err := g.HostAlloc(hostBytes)
	require.NoError(t, err)
	require.NoError(t, g.Fill(p, deviceBytes, 0x5a))
	require.NoError(t, g.Copy(h.Ptr(), p, hostBytes))
	require.Equal(t, byte(0x5a), h.Bytes()[hostBytes-1], "last byte of the host buffer after Fill and Copy")
	return g
}

// clientRow returns the fields of the row of the clients table whose
// context is ctx, or nil.
func clientRow(text string, ctx uint32) []string {
	inTable := false
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 0 && fields[0] == "PID":
			inTable = true
		case inTable && len(fields) >= 3 && fields[2] == fmt.Sprint(ctx):
			return fields
		}
	}
	return nil
}

// jsonReport is what a script reads of -json: the field names are the
// interface, so the test spells them out rather than reuse report.
type jsonReport struct {
	Memory struct {
		Total uint64 `json:"total_bytes"`
		Used  uint64 `json:"used_bytes"`
	} `json:"memory"`
	Interrupts uint64 `json:"interrupts"`
	Faults     uint64 `json:"faults"`
	Migrations uint64 `json:"migrations"`
	Engines    []struct {
		Engine            string  `json:"engine"`
		IdleMode          string  `json:"idle_mode"`
		State             string  `json:"state"`
		Commands          uint64  `json:"commands"`
		CommandsPerSecond float64 `json:"commands_per_second"`
		Channels          uint32  `json:"channels"`
	} `json:"engines"`
	Clients []struct {
		Pid          uint32 `json:"pid"`
		Context      uint32 `json:"context"`
		Channels     uint32 `json:"channels"`
		DeviceMemory uint64 `json:"device_memory_bytes"`
		HostMemory   uint64 `json:"host_memory_bytes"`
		Calls        uint64 `json:"calls"`
	} `json:"clients"`
}

// TestShowsAClientUntilItGoes: a client that allocated, registered and
// ran commands is listed with its pid, channels and memory, in text and
// in JSON alike; once it has closed, it is gone from the list and the
// device memory it held is free again.
func TestShowsAClientUntilItGoes(t *testing.T) {
	leakcheck.Check(t)
	s := serve(t, server.Config{})
	ctl := control(t, s.Node())
	baseline := mustTake(t, ctl, s.Node())
	g := busyClient(t, s)
	ctx := uint32(g.Context())
	cur := mustTake(t, ctl, s.Node())

	var text bytes.Buffer
	require.NoError(t, writeText(&text, baseline, cur))
	row := clientRow(text.String(), ctx)
	if row == nil {
		t.Fatalf("no row of context %d in the clients table:\n%s", ctx, text.String())
	}
	// PID UID CONTEXT CHANNELS DEVICE MEM (2 words) HOST MEM (2 words) CALLS
	want := []string{fmt.Sprint(os.Getpid()), fmt.Sprint(os.Getuid()), fmt.Sprint(ctx), "2", "1.0", "MiB", "64.0", "KiB"}
	if len(row) != len(want)+1 || !slices.Equal(row[:len(want)], want) {
		t.Errorf("client row = %q; want %q and the calls", row, want)
	}

	var out bytes.Buffer
	require.NoError(t, writeJSON(&out, baseline, cur))
	var r jsonReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), "-json output does not parse\n%s", out.String())
	if r.Memory.Total != cur.info.MemoryTotal || r.Memory.Used != cur.info.MemoryUsed || r.Memory.Used < deviceBytes {
		t.Errorf("JSON memory = %d used of %d; want %d (at least the client's %d) of %d",
			r.Memory.Used, r.Memory.Total, cur.info.MemoryUsed, deviceBytes, cur.info.MemoryTotal)
	}
	require.Equal(t, 1, len(r.Clients), "JSON lists %d clients; want 1 (the tool's own connection is not one):\n%s", len(r.Clients), out.String())
	c := r.Clients[0]
	if c.Pid != uint32(os.Getpid()) || c.Context != ctx || c.Channels != 2 || c.DeviceMemory != deviceBytes || c.HostMemory != hostBytes {
		t.Errorf("JSON client = %+v; want pid %d, context %d, 2 channels, %d bytes of device memory, %d of host memory",
			c, os.Getpid(), ctx, deviceBytes, hostBytes)
	}
	if calls := fmt.Sprint(c.Calls); row[len(row)-1] != calls {
		t.Errorf("text shows %s calls, JSON %s", row[len(row)-1], calls)
	}
	if len(r.Engines) != 2 || r.Engines[0].Engine != "compute" || r.Engines[1].Engine != "copy" {
		t.Fatalf("JSON engines = %+v; want compute, then copy", r.Engines)
	}
	// The engine stores its command count after each command's completion,
	// so the last command's count may not be in cur yet; the Fill's is, as
	// the same engine stored it before completing the Copy. So the rate is
	// positive whatever the timing.
	if copyEngine := r.Engines[1]; copyEngine.CommandsPerSecond <= 0 || copyEngine.Channels == 0 {
		t.Errorf("copy engine = %+v; want commands since the baseline, and the client's channel on its runlist", copyEngine)
	}

	g.Close()
	// The daemon tears a client down after it reads the close, on its own
	// goroutine: poll for that, with a bound far past a teardown's length.
	// It frees the client's memory before it drops it from the list, and
	// take asks for the list before INFO, so once the client is gone its
	// memory must be free.
	deadline := time.Now().Add(10 * time.Second)
	after := mustTake(t, ctl, s.Node())
	for len(newReport(cur, after).Clients) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		after = mustTake(t, ctl, s.Node())
	}
	text.Reset()
	require.NoError(t, writeText(&text, cur, after))
	if row := clientRow(text.String(), ctx); row != nil || !strings.Contains(text.String(), "no clients attached") {
		t.Errorf("after Close, the report still lists context %d:\n%s", ctx, text.String())
	}
	assert.Equal(t, baseline.info.MemoryUsed, after.info.MemoryUsed, "device memory used after the client closed; want the baseline %d", baseline.info.MemoryUsed)
}

// TestRunJSON runs the command as a script would: one JSON object on one
// line, exit status 0.
func TestRunJSON(t *testing.T) {
	leakcheck.Check(t)
	s := serve(t, server.Config{})
	g := busyClient(t, s)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-node", s.Node(), "-json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("softgpu-smi -json = exit %d; want 0; stderr:\n%s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 1 {
		t.Errorf("softgpu-smi -json wrote %d lines; want 1:\n%s", n, stdout.String())
	}
	var r jsonReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), "-json output does not parse\n%s", stdout.String())
	if len(r.Clients) != 1 || r.Clients[0].Context != uint32(g.Context()) || r.Clients[0].DeviceMemory != deviceBytes {
		t.Errorf("JSON clients = %+v; want context %d with %d bytes of device memory", r.Clients, g.Context(), deviceBytes)
	}
}

// TestRunLoopEndsOnInterrupt: with -l, reports come until the context is
// cancelled (^C), and that is a normal end. The test interrupts it as the
// second report is written.
func TestRunLoopEndsOnInterrupt(t *testing.T) {
	leakcheck.Check(t)
	s := serve(t, server.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := &interruptAfter{reports: 2, cancel: cancel}
	var stderr bytes.Buffer
	if code := run(ctx, []string{"-node", s.Node(), "-json", "-l", "0.05"}, stdout, &stderr); code != 0 {
		t.Fatalf("softgpu-smi -l = exit %d; want 0; stderr:\n%s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 2 {
		t.Errorf("softgpu-smi -l wrote %d reports before the interrupt; want 2:\n%s", n, stdout.String())
	}
}

// interruptAfter is a stdout that cancels the command's context once it
// has been written reports times: a ^C at a known point.
type interruptAfter struct {
	bytes.Buffer
	reports int
	cancel  func()
}

func (w *interruptAfter) Write(p []byte) (int, error) {
	if w.reports--; w.reports == 0 {
		w.cancel()
	}
	return w.Buffer.Write(p)
}

// TestNoDaemon: a node nobody serves is exit status 1 and a sentence that
// says so, whether there is no socket or a stale one.
func TestNoDaemon(t *testing.T) {
	for _, tc := range []struct {
		name string
		node func(t *testing.T) string
	}{
		{"no socket", func(t *testing.T) string { return filepath.Join(t.TempDir(), "card0") }},
		{"stale socket", func(t *testing.T) string {
			node := filepath.Join(t.TempDir(), "card0")
			ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: node, Net: "unixpacket"})
			require.NoError(t, err)
			ln.SetUnlinkOnClose(false) // as a daemon killed with -9 leaves it
			ln.Close()
			return node
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node(t)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-node", node}, &stdout, &stderr)
			want := fmt.Sprintf("softgpu-smi: no daemon at %s: is softgpud running?\n", node)
			if code != 1 || stderr.String() != want {
				t.Errorf("softgpu-smi -node %s = exit %d, stderr %q; want exit 1, %q", node, code, stderr.String(), want)
			}
			assert.Equal(t, 0, stdout.Len(), "stdout = %q", stdout.String())
		})
	}
}
