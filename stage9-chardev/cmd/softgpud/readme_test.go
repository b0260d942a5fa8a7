package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's way to start and stop the daemon, run as written: a
// shell runs `go run ./stage9-chardev/cmd/softgpud &`, then `kill $!`;
// nothing of it may be left running, and the next start must work.

// patience is how long the test waits for something that takes seconds
// at most: go run building the daemon, the daemon stopping.
const patience = 60 * time.Second

// markerEnv marks the processes this test starts, so it finds them in
// /proc (what ps reads) and nobody else's.
const markerEnv = "SOFTGPU_README_TEST"

// readmeLines are the README's start and stop lines, in its order.
var readmeLines = []string{"go run ./stage9-chardev/cmd/softgpud &", "kill $!"}

func TestTheReadmesStartAndStopLeaveNothingRunning(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Skip("not in the repository (a copied-out stage): the README's lines name its paths")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	at := 0
	for _, line := range readmeLines {
		i := bytes.Index(readme[at:], []byte("\n"+line))
		if i < 0 {
			t.Fatalf("the README does not show %q (after its earlier lines); this test runs what it shows", line)
		}
		at += i + 1
	}

	runtimeDir := t.TempDir() // the node: $XDG_RUNTIME_DIR/softgpu/card0
	node := filepath.Join(runtimeDir, "softgpu", "card0")
	token := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { killMarked(token) })

	for round := range 2 { // the second start finds the node free
		sh := exec.Command("/bin/sh", "-s")
		sh.Dir = root
		// As a reader at the repository's root runs it: in the workspace,
		// whatever GOWORK this test was run with (GOWORK=off, as for a
		// copied-out stage, would leave the root without a module).
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOWORK=") })
		sh.Env = append(env, "XDG_RUNTIME_DIR="+runtimeDir, markerEnv+"="+token, "PATH="+filepath.Dir(gobin)+":"+os.Getenv("PATH"))
		in, err := sh.StdinPipe()
		require.NoError(t, err)
		// A file, not a pipe: a daemon left running would hold a pipe open
		// and Wait with it.
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		require.NoError(t, err)
		sh.Stdout, sh.Stderr = out, out
		require.NoError(t, sh.Start())
		io.WriteString(in, readmeLines[0]+"\n")
		waitUntil(t, fmt.Sprintf("round %d: softgpud serving %s", round, node), token, out, func() bool {
			fi, err := os.Stat(node)
			return err == nil && fi.Mode()&os.ModeSocket != 0
		})
		io.WriteString(in, readmeLines[1]+"\nwait\nexit\n")
		in.Close()
		if err := sh.Wait(); err != nil {
			t.Logf("the shell: %v", err)
		}
		waitUntil(t, fmt.Sprintf("round %d: nothing left running after kill $!", round), token, out, func() bool {
			return len(marked(token)) == 0
		})
		_, err = os.Stat(node)
		assert.ErrorIs(t, err, os.ErrNotExist, "round %d: the node after the daemon stopped; want it removed", round)
	}
}

// waitUntil polls cond until it holds, or fails the test after patience
// with the shell's output.
func waitUntil(t *testing.T, what, token string, out *os.File, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(patience); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("after %v: %s did not happen; processes still running: %v\n%s", patience, what, marked(token), b)
		}
	}
}

// marked returns the live processes whose environment carries token (ps
// reads the same /proc).
func marked(token string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	want := []byte(markerEnv + "=" + token + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue // a zombie: it has exited
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// killMarked kills what this test started and left running.
func killMarked(token string) {
	for _, pid := range marked(token) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
