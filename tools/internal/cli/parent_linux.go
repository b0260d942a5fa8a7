package cli

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// followGoRun makes a command started by `go run` stop when the go command
// is killed. `go run` forwards no signal to the program it runs, and in a
// shell `$!` after `go run ./tools/cmd/record ... &` is the go command's
// pid: `kill $!` used to kill the go command and leave the tool measuring,
// and writing, on its own. When the parent is the go command, ask the
// kernel for SIGTERM when it dies; SignalContext then stops the tool
// cleanly. Any other parent (a shell, nohup, a built binary's caller) is
// left alone: a tool started in the background on purpose keeps running
// when its shell exits.
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

// setDeathSignal has the kernel kill a child if this process dies first.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
