package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What the hostile tests read of a process in /proc: the state of its
// threads, its children (the daemon's punch helpers) and its descriptors.

// procState returns the state letter of process or thread stat (a
// /proc/.../stat file) and its parent's pid; 0 if it is gone.
func procState(stat string) (state byte, ppid int) {
	b, err := os.ReadFile(stat)
	if err != nil {
		return 0, 0
	}
	i := strings.LastIndexByte(string(b), ')') // the command may hold spaces and parentheses
	if i < 0 || i+2 >= len(b) {
		return 0, 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 2 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid
}

// dStateThreads counts pid's threads in uninterruptible sleep.
func dStateThreads(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	n := 0
	for _, task := range tasks {
		if state, _ := procState(task); state == 'D' {
			n++
		}
	}
	return n
}

// procCounts returns pid's open descriptors (its schedstat files aside)
// and threads, and how many live children (punch helpers) it has.
func procCounts(pid int) (fds, threads, helpers int) {
	f, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range f {
		if link, _ := os.Readlink(fd); !strings.HasSuffix(link, "/schedstat") { // one per thread, not per client (offcpu.go)
			fds++
		}
	}
	th, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	return fds, len(th), len(helperChildren(pid))
}

// children returns the pids of pid's children whose state letter
// passes keep.
func children(pid int, keep func(state byte) bool) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, stat := range stats {
		if state, ppid := procState(stat); ppid == pid && state != 0 && keep(state) {
			kid, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
			kids = append(kids, kid)
		}
	}
	return kids
}

// helperChildren returns the pids of pid's live children: a daemon's
// punch helpers.
func helperChildren(pid int) []int {
	return children(pid, func(state byte) bool { return state != 'Z' })
}

// stuckChildren returns the pids of pid's children in uninterruptible
// sleep.
func stuckChildren(pid int) []int {
	return children(pid, func(state byte) bool { return state == 'D' })
}
