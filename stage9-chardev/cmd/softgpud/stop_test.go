package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStopStopsTheDaemon: `softgpud -stop` finds the daemon serving the
// node by its pid file, and returns once it has exited, cleanly, with its
// node and pid file gone; a second -stop says there is none.
func TestStopStopsTheDaemon(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	dir := t.TempDir()
	bin, node := filepath.Join(dir, "softgpud"), filepath.Join(dir, "run", "card0")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := exec.Command(bin, "-node", node, "-mem", "16777216")
	logs, err := os.Create(filepath.Join(dir, "log"))
	require.NoError(t, err)
	d.Stderr = logs
	require.NoError(t, d.Start())
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	t.Cleanup(func() {
		d.Process.Kill()
		<-exited
	})
	// Wait for the pid file to name the daemon, not merely to exist: the
	// daemon creates it, then writes it, and a -stop that read it in
	// between would find no pid (a daemon kept off a core there, as on a
	// loaded machine, holds that window open).
	for deadline := time.Now().Add(patience); ; time.Sleep(10 * time.Millisecond) {
		if pid, err := readPid(node); err == nil && pid == d.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file %s naming pid %d after %v", pidFile(node), d.Process.Pid, patience)
		}
	}
	if out, err := exec.Command(bin, "-node", node, "-stop").CombinedOutput(); err != nil {
		t.Fatalf("softgpud -stop: %v\n%s", err, out)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			b, _ := os.ReadFile(logs.Name())
			t.Fatalf("the daemon after -stop: %v; want status 0\n%s", err, b)
		}
	case <-time.After(patience):
		t.Fatalf("-stop returned with the daemon still running")
	}
	for _, p := range []string{node, pidFile(node)} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, "%s after -stop; want it removed", p)
	}
	if out, err := exec.Command(bin, "-node", node, "-stop").CombinedOutput(); err == nil {
		t.Errorf("a second -stop succeeded (%s); want an error: no daemon", out)
	}
}
