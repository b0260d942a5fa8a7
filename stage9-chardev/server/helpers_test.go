package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/internal/servetest"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// This file holds the helpers every test of the daemon shares: a daemon
// in this process, clients of it, a control connection to watch it, and
// the two ways a test waits — polling a condition until a deadline, and
// never by sleeping and hoping.

// patience is how long a test waits for something the daemon should do
// in milliseconds (tear a client down, drop one that does not read): a
// hundred times what it takes on a loaded 2-core machine under -race, so
// a failure means it did not happen, not that it was slow.
const patience = 10 * time.Second

// serve starts a daemon in this process for the rest of the test.
var serve = servetest.Serve

// deviceConfig is a device of mem bytes of memory.
func deviceConfig(mem uint64) device.Config { return device.Config{MemorySize: mem} }

// quiet is a logger that discards.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// dial connects a client that is closed when the test ends.
func dial(t testing.TB, s *server.Server) *client.GPU {
	t.Helper()
	g, err := client.Dial(s.Node())
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

// control connects a control connection (VERSION only: no context, no
// channel) that is closed when the test ends.
func control(t testing.TB, node string) *client.Control {
	t.Helper()
	ctl, err := client.DialControl(node)
	require.NoError(t, err)
	t.Cleanup(func() { ctl.Close() })
	return ctl
}

// waitFor polls cond until it holds or patience runs out; then it fails
// the test saying what did not happen, with what cond last reported.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s did not happen (last: %s)", patience, what, last)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// info returns the daemon's INFO.
func info(t testing.TB, ctl *client.Control) uapi.Info {
	t.Helper()
	in, err := ctl.Info()
	require.NoError(t, err, "INFO")
	return in
}

// clientCount returns how many clients the daemon lists, ctl included.
func clientCount(t testing.TB, ctl *client.Control) int {
	t.Helper()
	cs, err := ctl.Clients()
	require.NoError(t, err, "CLIENT_INFO")
	return len(cs)
}

// waitClients waits until the daemon lists exactly n clients.
func waitClients(t testing.TB, ctl *client.Control, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the daemon listing %d client(s)", n), func() (bool, string) {
		got := clientCount(t, ctl)
		return got == n, fmt.Sprintf("%d client(s)", got)
	})
}

// waitNoClientOf waits until the daemon lists no client of process pid.
func waitNoClientOf(t testing.TB, ctl *client.Control, pid uint32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the daemon listing no client of pid %d", pid), func() (bool, string) {
		cs, err := ctl.Clients()
		require.NoError(t, err, "CLIENT_INFO")
		n := 0
		for _, c := range cs {
			if c.Pid == pid {
				n++
			}
		}
		return n == 0, fmt.Sprintf("%d client(s) of pid %d among %d", n, pid, len(cs))
	})
}

// waitNoClientWithContext waits until the daemon lists no client whose
// context is ctx: one client torn down, whoever else comes and goes.
func waitNoClientWithContext(t testing.TB, ctl *client.Control, ctx uint32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the daemon listing no client of context %d", ctx), func() (bool, string) {
		cs, err := ctl.Clients()
		require.NoError(t, err, "CLIENT_INFO")
		for _, c := range cs {
			if c.Context == ctx {
				return false, fmt.Sprintf("context %d still listed among %d client(s)", ctx, len(cs))
			}
		}
		return true, ""
	})
}

// openFDs counts this process's open descriptors: the daemon's, when it
// runs in this process. The schedstat files the daemon keeps open, one
// per thread that made a call into a client's memory (offcpu.go), are
// not counted: they come with threads, not with clients.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err, "counting descriptors")
	n := 0
	for _, e := range ents {
		if link, _ := os.Readlink("/proc/self/fd/" + e.Name()); !strings.HasSuffix(link, "/schedstat") {
			n++
		}
	}
	return n - 1 // the directory ReadDir itself opened
}

// hostMappings counts this process's mappings of client host memory
// (memfds named "softgpu-host" and the tests' own "hostile-host"): a
// daemon that forgot to unmap a client's region leaves one here.
func hostMappings(t testing.TB) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err, "reading mappings")
	n := 0
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.Contains(line, "memfd:softgpu-host") || strings.Contains(line, "memfd:hostile-host") {
			n++
		}
	}
	return n
}

// settledGoroutines returns runtime.NumGoroutine once it is at most want,
// or after patience: a goroutine that has been told to end may take a
// moment to.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(patience); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(5 * time.Millisecond)
	}
	return n
}
