// Package leakcheck fails a test that leaves goroutines of this module
// running: an engine loop that outlived Close, a waiter nobody woke.
package leakcheck

import (
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// modulePath is the path of the module this package belongs to, derived from
// the package's own import path, so the check keeps working when a stage is
// copied out and its module renamed.
var modulePath = strings.TrimSuffix(reflect.TypeFor[marker]().PkgPath(), "/internal/leakcheck")

type marker struct{}

// checked holds the tests whose check is registered (testing.TB → struct{}).
var checked sync.Map

// Check registers a cleanup that fails t if, after every cleanup registered
// later (such as closing the device) has run, a goroutine other than the
// caller is still running code of this module. Call it first in a test,
// before opening anything.
//
// Only a test's first call registers: cleanups run last-registered first,
// so the first call's check is the one that runs after everything the test
// opened has closed. A second call's check would run before the cleanups
// registered between the two calls (a test that opens two devices, each
// through a helper that calls Check) and report their goroutines.
func Check(t testing.TB) {
	t.Helper()
	if _, again := checked.LoadOrStore(t, struct{}{}); again {
		return
	}
	t.Cleanup(func() {
		defer checked.Delete(t)
		// Goroutines that have been told to stop may need a moment to
		// return; 5 s is far beyond any engine's exit path, so a failure
		// here is a goroutine that will never return, not a slow one.
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := Running()
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
// a frame in a function of this module, leaving out test functions
// themselves (the testing package's goroutines run them).
func Running() []string {
	prefix := modulePath + "/"
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
		if !strings.HasPrefix(line, prefix) && !strings.HasPrefix(line, modulePath+".") {
			continue
		}
		// A goroutine sitting in a Test, Benchmark, Example or Fuzz
		// function is the testing package's own, still unwinding or
		// running the fuzz target.
		fn := line[strings.LastIndex(line, "/")+1:]
		if strings.Contains(fn, ".Test") || strings.Contains(fn, ".Benchmark") || strings.Contains(fn, ".Example") || strings.Contains(fn, ".Fuzz") {
			continue
		}
		return true
	}
	return false
}

// RunningIn returns the stacks Running returns that have a frame in a
// function whose name contains fn, such as "(*Engine).execute". Right after
// a sync.WaitGroup reports a goroutine done, Running may still list it: its
// deferred Done has run, its return has not. A test that asks "is anything
// still doing fn?" asks RunningIn, which that moment cannot fool.
func RunningIn(fn string) []string {
	var out []string
	for _, g := range Running() {
		if strings.Contains(g, fn+"(") {
			out = append(out, g)
		}
	}
	return out
}
