package softgpu_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage8-managed"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/driver"
	"softgpu/stage8-managed/internal/leakcheck"
)

func openTest(t testing.TB) *softgpu.GPU {
	t.Helper()
	leakcheck.Check(t)
	g, err := softgpu.Open(softgpu.Config{MemorySize: 4 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

func TestWriteFillCopyRead(t *testing.T) {
	g := openTest(t)
	a := mustAlloc(t, g, 1000)
	b := mustAlloc(t, g, 1000)
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i)
	}
	must(t, g.Write(a, src))
	must(t, g.Fill(a+100, 50, 0xcc))
	must(t, g.Copy(b, a, 1000))
	got := make([]byte, 1000)
	must(t, g.Read(got, b))
	want := bytes.Clone(src)
	copy(want[100:150], bytes.Repeat([]byte{0xcc}, 50))
	assert.Equal(t, want, got, "Read after Write, Fill, Copy = %v...; want %v...", got[95:105], want[95:105])
}

func TestErrorsReachTheCaller(t *testing.T) {
	g := openTest(t)
	p := mustAlloc(t, g, 64)
	assert.ErrorIs(t, g.Sum32(p+4, p, 8), abi.StatusMisaligned, "Sum32 with a misaligned result")
	assert.ErrorIs(t, g.Fill(p, 1<<40, 0), abi.StatusOutOfRange, "Fill of 1 TiB")
	require.NoError(t, g.Free(p))
	assert.ErrorIs(t, g.Free(p), driver.ErrDoubleFree, "second Free")
	assert.Equal(t, uint64(0), g.MemoryInUse(), "MemoryInUse after freeing everything")
}

func TestCloseEndsEverything(t *testing.T) {
	g := openTest(t)
	must(t, g.Close())
	assert.ErrorIs(t, g.Nop(softgpu.Copy), driver.ErrClosed, "Nop after Close")
}

func mustAlloc(t testing.TB, g *softgpu.GPU, n uint64) softgpu.Ptr {
	t.Helper()
	p, err := g.Alloc(n)
	require.NoError(t, err)
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	require.NoError(t, err)
}

// TestTraceIsWrittenOnClose opens a GPU with tracing to a file, runs a
// command, closes it, and finds the file: trace-event JSON naming the
// command.
func TestTraceIsWrittenOnClose(t *testing.T) {
	leakcheck.Check(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	g, err := softgpu.Open(softgpu.Config{MemorySize: 1 << 20, Trace: path})
	require.NoError(t, err)
	p := mustAlloc(t, g, 64)
	must(t, g.Fill(p, 64, 1))
	assert.Error(t, g.WriteTrace(io.Discard), "WriteTrace before Close")
	must(t, g.Close())
	events := readTrace(t, path)
	found := false
	for _, ev := range events {
		found = found || (ev.Name == "FILL" && ev.Ph == "X")
	}
	if !found {
		t.Errorf("trace has no FILL command among its %d events", len(events))
	}
}

// TestBadTraceConfig: a trace path in a directory that does not exist, and
// a bad SOFTGPU_TRACE_EVENTS, are ErrConfig at Open, not a lost trace at
// Close.
func TestBadTraceConfig(t *testing.T) {
	_, err := softgpu.Open(softgpu.Config{Trace: "/nonexistent/dir/trace.json"})
	assert.ErrorIs(t, err, softgpu.ErrConfig, "Open with Trace in a missing directory")
	t.Setenv("SOFTGPU_TRACE_EVENTS", "many")
	_, err = softgpu.Open(softgpu.Config{})
	assert.ErrorIs(t, err, softgpu.ErrConfig, "Open with SOFTGPU_TRACE_EVENTS=many")
}

// TestErrorsNeedNoOtherImport: the errors a caller checks are all in this
// package.
func TestErrorsNeedNoOtherImport(t *testing.T) {
	g := openTest(t)
	assert.ErrorIs(t, g.Nop(softgpu.Engine(7)), softgpu.ErrNoEngine, "Nop on engine 7")
	assert.ErrorIs(t, g.Fill(0, 1<<40, 0), softgpu.StatusOutOfRange, "Fill of 1 TiB")
	_, err := g.Alloc(0)
	assert.ErrorIs(t, err, softgpu.ErrZeroSize, "Alloc(0)")
	_, err = softgpu.Open(softgpu.Config{MemorySize: 1 << 40})
	assert.ErrorIs(t, err, softgpu.ErrConfig, "Open with 1 TiB")
}

// traceEvent is one event of a trace file (trace/json.go), with the fields
// the tests look at.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Args map[string]any `json:"args"`
}

// readTrace reads the trace file at path and returns its events in the
// file's order.
func readTrace(t testing.TB, path string) []traceEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &f), "trace %s is not JSON", path)
	return f.TraceEvents
}
