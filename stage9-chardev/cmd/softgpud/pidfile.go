package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The pid file: NODE.pid beside the node, in the directory only the
// daemon's uid may write (server/node.go), written once the node serves
// and removed when the daemon stops. `softgpud -stop` reads it and sends
// SIGTERM, the way to stop a daemon whatever started it.

// pidFile is the pid file of node.
func pidFile(node string) string { return node + ".pid" }

// writePid records this process's pid for node. It writes a temporary
// file beside the pid file and renames it over: a rename is atomic, so a
// `softgpud -stop` that reads the pid file the moment the daemon starts
// finds it absent or whole. (os.WriteFile creates the file empty and then
// writes it, and a -stop that read in between failed with "does not hold
// a pid".)
func writePid(node string) error {
	f, err := os.CreateTemp(filepath.Dir(node), filepath.Base(pidFile(node))+".*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), pidFile(node))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// removePid removes node's pid file if it names this process.
func removePid(node string) {
	if pid, err := readPid(node); err == nil && pid == os.Getpid() {
		os.Remove(pidFile(node))
	}
}

// readPid returns the pid node's pid file names.
func readPid(node string) (int, error) {
	b, err := os.ReadFile(pidFile(node))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s does not hold a pid: %q", pidFile(node), b)
	}
	return pid, nil
}

// stopBound is how long -stop waits for the daemon to exit after its
// SIGTERM: the daemon's own shutdown bound (shutdownBound) and a margin.
const stopBound = shutdownBound + 5*time.Second

// stop sends SIGTERM to the daemon serving node and waits until it has
// exited, at most stopBound.
func stop(node string) error {
	pid, err := readPid(node)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no daemon serving %s (no %s)", node, pidFile(node))
	}
	if err != nil {
		return err
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) != "softgpud" {
		// The daemon died without removing its file, and the pid is
		// another program's now: never signal that.
		return fmt.Errorf("no daemon serving %s (pid %d in %s is %s now)", node, pid, pidFile(node), strings.TrimSpace(string(comm)))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			os.Remove(pidFile(node)) // stale: a daemon that died without removing it
			return fmt.Errorf("no daemon serving %s (pid %d in %s has exited)", node, pid, pidFile(node))
		}
		return fmt.Errorf("signalling pid %d: %w", pid, err)
	}
	for deadline := time.Now().Add(stopBound); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if _, err := os.Stat(pidFile(node)); errors.Is(err, os.ErrNotExist) {
			return nil // it removed its pid file: its last act before exiting
		}
	}
	return fmt.Errorf("pid %d still running %v after SIGTERM", pid, stopBound)
}
