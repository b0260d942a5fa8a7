package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// followGoRun makes a daemon started by `go run` stop when the go command
// is killed, as the project's tools do (tools/internal/cli; the stage
// keeps its own copy, to stay self-contained). `go run` forwards no
// signal to the program it runs, and in a shell `$!` after
// `go run ./stage9-chardev/cmd/softgpud &` is the go command's pid:
// `kill $!` used to kill the go command and leave softgpud serving under
// pid 1, so the next start failed with ErrNodeBusy. When the parent is
// the go command, ask the kernel for SIGTERM when it dies; main then
// shuts down as for any SIGTERM. Any other parent (a shell, nohup,
// systemd) is left alone: a daemon started in the background on purpose
// keeps serving when its shell exits.
func followGoRun() {
	parent := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", parent))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	if os.Getppid() != parent {
		// The go command died before the request was in place.
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}
