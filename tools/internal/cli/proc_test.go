//go:build linux

package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gone reports whether process pid has exited: it no longer exists, or is
// a zombie waiting for a parent that is not this test to reap it.
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(s[i+1:], " Z") || strings.HasPrefix(s[i+1:], " X")
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			killPid(pid)
			t.Fatalf("%s (pid %d) still running 5 s later", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func killPid(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// startForPid starts cmd and returns the process id it prints as the
// first line of its stdout: that of the process a test watches, which cmd
// starts or is.
func startForPid(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "%s said %q; want a process id", cmd.Path, line)
	return pid
}

// TestExecGroupKillsGrandchildren starts a shell that starts a sleep, ends
// the context, and checks the sleep died with the shell.
func TestExecGroupKillsGrandchildren(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := ExecGroup(ctx, "sh", "-c", "sleep 60 & echo $!; wait")
	sleepPid := startForPid(t, cmd)
	start := time.Now()
	cancel()
	assert.Error(t, cmd.Wait(), "Wait after cancel = nil; want the kill reported")
	waitGone(t, sleepPid, "the shell's sleep")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the group took %v to stop; want it prompt", d)
	}
}

// TestFollowGoRun runs this test binary as a helper under a parent named
// "go" (a shell script of that name, as `go run` is the go command), kills
// the parent, and checks that the helper stops too.
func TestFollowGoRun(t *testing.T) {
	if os.Getenv("CLI_TEST_HELPER") == "follow" {
		followGoRun()
		fmt.Printf("%d\n", os.Getpid())
		time.Sleep(60 * time.Second)
		os.Exit(0)
	}
	tests := []struct {
		parent   string
		wantStop bool
	}{
		{"go", true},
		{"notgo", false}, // a shell or nohup: the helper keeps running
	}
	for _, tt := range tests {
		t.Run(tt.parent, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), tt.parent)
			require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n\"$@\"\n"), 0o755))
			cmd := exec.Command(script, os.Args[0], "-test.run=^TestFollowGoRun$")
			cmd.Env = append(os.Environ(), "CLI_TEST_HELPER=follow")
			helper := startForPid(t, cmd)
			defer killPid(helper)
			cmd.Process.Kill() // the parent, as `kill $!` kills the go command
			cmd.Wait()
			if tt.wantStop {
				waitGone(t, helper, "a tool whose go run parent was killed")
				return
			}
			time.Sleep(300 * time.Millisecond)
			if gone(helper) {
				t.Errorf("the helper stopped when its parent %q died; only a go parent should stop it", tt.parent)
			}
		})
	}
}
