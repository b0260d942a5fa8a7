// Package leakcheck fails a test that leaves goroutines of this module
// running: an engine loop that outlived Close, a waiter nobody woke.
package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Check registers a cleanup that fails t if, after every cleanup registered
// later (such as closing the device) has run, a goroutine other than the
// caller is still running code of package prefix (e.g. "softgpu/"). Call it
// first in a test, before opening anything.
func Check(t testing.TB, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		// Goroutines that have been told to stop may need a moment to
		// return; 5 s is far beyond any engine's exit path, so a failure
		// here is a goroutine that will never return, not a slow one.
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := Running(prefix)
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leakcheck: %d goroutine(s) still running after the test:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// Running returns the stacks of every goroutine except the caller's that has
// a frame in a function whose name starts with prefix, leaving out test
// functions themselves (the testing package's goroutines run them).
func Running(prefix string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	stacks := strings.Split(string(buf), "\n\n")
	for _, g := range stacks[1:] { // stacks[0] is the calling goroutine
		if ours(g, prefix) {
			out = append(out, g)
		}
	}
	return out
}

func ours(stack, prefix string) bool {
	for _, line := range strings.Split(stack, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		// A goroutine sitting in a Test or Benchmark function is the
		// testing package's own, still unwinding.
		fn := line[strings.LastIndex(line, "/")+1:]
		if strings.Contains(fn, ".Test") || strings.Contains(fn, ".Benchmark") || strings.Contains(fn, ".Example") {
			continue
		}
		return true
	}
	return false
}
