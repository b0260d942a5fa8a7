//go:build unix

package cli

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// ExecGroup returns a command that runs in a process group of its own and,
// when ctx ends, is killed with everything it started: `go test -c` with its
// compiler and linker, `go tool benchstat` with benchstat, a benchmark
// binary with any helper it forked. Killing only the direct child, as
// exec.CommandContext does, would leave those running.
//
// Being in its own group, the child does not see a terminal's Ctrl-C
// itself; the command that started it gets the signal, ends ctx, and so
// kills the group. On Linux the child is also killed if the command dies
// without cleaning up (kill -9).
func ExecGroup(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		// The group's id is the child's pid (Setpgid with Pgid 0).
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
