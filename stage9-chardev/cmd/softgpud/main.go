// Command softgpud owns a softgpu and serves it on a device node, a Unix
// socket, until SIGINT or SIGTERM:
//
//	go run ./stage9-chardev/cmd/softgpud                  # $XDG_RUNTIME_DIR/softgpu/card0
//	go run ./stage9-chardev/cmd/softgpud -node ~/gpu/card0 -mode 0660
//	go run ./stage9-chardev/cmd/softgpud -stop            # SIGTERM to the daemon serving the node
//
// It stops within shutdownBound of SIGTERM whatever its clients are
// doing, and when its parent is the go command (go run), it stops when
// that dies (parent.go). It exits 0 after a signal and non-zero when
// serving stopped for any other reason. The node's directory must be
// the daemon's uid's alone (package server, node.go); NODE.pid beside
// the node holds its pid while it serves (pidfile.go).
//
// Applications reach it with package client; softgpu-smi shows what it is
// doing. Package server has the design.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

func main() {
	node := flag.String("node", uapi.DefaultNode(), "the device node: a Unix socket path")
	mode := flag.String("mode", "0600", "the node's permission bits, in octal: who may connect")
	mem := flag.Uint64("mem", 0, "bytes of device memory (0: the device's default, 64 MiB); the page-table pool takes 1/16 of it, so clients can allocate (and softgpu-smi shows) a little less")
	verbose := flag.Bool("v", false, "log every refused call")
	idle := flag.Duration("idle-budget", server.DefaultIdleBudget*time.Nanosecond, "how long an idle engine spins before it sleeps (0: sleep at once)")
	traceFile := flag.String("trace", "", "write the device's trace to this file when the daemon stops (Chrome trace-event JSON; open it in ui.perfetto.dev)")
	conns := flag.Int("max-conns-per-uid", server.DefaultMaxConnsPerUID, "the most connections one uid may hold open; past it a connection is closed at once")
	attachTimeout := flag.Duration("attach-timeout", server.DefaultAttachTimeout, "how long a connection that has not attached may go without a call before it is dropped (softgpu-smi's control connection redials)")
	watchdog := flag.Duration("watchdog", defaultWatchdog, "the longest one command may run on an engine before it is stopped and its channel faulted (0: no limit)")
	preemptTimeout := flag.Duration("preempt-timeout", defaultPreemptTimeout, "how long a command an engine has asked to give way to another channel may take to do so before the engine is reset under it, as by the watchdog (0: never)")
	stopIt := flag.Bool("stop", false, "stop the daemon serving -node (SIGTERM to the pid in NODE.pid) and wait for it to exit")
	var clientQuota, uidQuota server.Quota
	quotaFlags(flag.CommandLine, &clientQuota, &uidQuota)
	var priorityUIDs uidList
	flag.Var(&priorityUIDs, "priority-uids", "comma-separated uids, besides root, that may open channels above normal priority or with a timeslice")
	flag.Parse()
	if *stopIt {
		if err := stop(*node); err != nil {
			fmt.Fprintf(os.Stderr, "softgpud -stop: %v\n", err)
			os.Exit(1)
		}
		return
	}
	// Signals are caught before the node exists: one that comes while the
	// device opens stops the daemon cleanly once it has (node removed).
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	followGoRun()
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || perm > 0o777 {
		fmt.Fprintf(os.Stderr, "softgpud: -mode %q is not an octal permission like 0600\n", *mode)
		os.Exit(2)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := server.Config{Node: *node, Mode: os.FileMode(perm), Log: log, Trace: *traceFile}
	cfg.Device.MemorySize = *mem
	if *conns <= 0 || *attachTimeout <= 0 {
		fmt.Fprintf(os.Stderr, "softgpud: -max-conns-per-uid %d and -attach-timeout %v must be positive\n", *conns, *attachTimeout)
		os.Exit(2)
	}
	cfg.MaxConnsPerUID, cfg.AttachTimeout = *conns, *attachTimeout
	if *watchdog < 0 {
		fmt.Fprintf(os.Stderr, "softgpud: -watchdog %v is negative\n", *watchdog)
		os.Exit(2)
	}
	cfg.Driver.Watchdog = uint64(watchdog.Nanoseconds()) // cycles are nanoseconds
	if *preemptTimeout < 0 {
		fmt.Fprintf(os.Stderr, "softgpud: -preempt-timeout %v is negative\n", *preemptTimeout)
		os.Exit(2)
	}
	cfg.Driver.PreemptTimeout = uint64(preemptTimeout.Nanoseconds())
	cfg.PriorityUIDs = priorityUIDs
	cfg.ClientQuota, cfg.UidQuota = clientQuota, uidQuota
	if *idle < 0 {
		fmt.Fprintf(os.Stderr, "softgpud: -idle-budget %v is negative\n", *idle)
		os.Exit(2)
	}
	cfg.Driver.Idle = driver.Idle{Mode: driver.IdleHybrid, Budget: uint64(idle.Nanoseconds())}
	if *idle == 0 {
		cfg.Driver.Idle.Mode = driver.IdleSleep
	}
	s, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "softgpud: %v\n", err)
		os.Exit(1)
	}
	if err := writePid(s.Node()); err != nil {
		log.Error("writing the pid file", "err", err)
		s.Close()
		os.Exit(1)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	status := 0
	select {
	case sig := <-signals:
		log.Info("shutting down", "signal", sig.String())
	case err := <-done:
		// Not asked to stop: whoever started it must hear it failed.
		log.Error("serving stopped", "err", err)
		status = 1
	}
	os.Exit(shutdown(s, log, signals, status))
}

// defaultWatchdog is softgpud's limit on one command's time on an
// engine. In-process, a program that submits a DELAY of 2^62 cycles
// hangs only itself; in the daemon every client is a stranger to the
// others, and a command that never ends would hold its engine's slot,
// its channel's teardown and its memory for good. The engines' own
// watchdog (stage 6) stops it at the next boundary past the limit and
// faults its channel and context. Two seconds is hundreds of times the
// longest command a client of a 64 MiB device needs (a copy of all of
// it takes about 3 ms here: four times H2D/mem=pinned/size=16MiB's
// 0.81 ms at the median in the chardev record at 885b3ad), and short
// enough that a stuck client is noticed before its user gives up. A
// command that never reaches a preemption point holds its engine twice
// that, until the watchdog resets the engine, and its user is then
// barred for a while (server/hangbars.go).
const defaultWatchdog = 2 * time.Second

// defaultPreemptTimeout is how long a command may keep its engine after
// the engine has asked it to give way to another channel (a channel that
// has waited past every priority, 1 ms, is enough to ask): i915's
// default, 640 ms. A command with preemption points gives way within
// microseconds and never meets it; a command with none (a SPIN) is reset
// under at it, its user barred as for the watchdog's reset
// (server/hangbars.go). Without it a SPIN that ends before the
// watchdog's reset — one and a half limits — would hold its engine
// against everyone and never be judged; with it nobody waits behind one
// much longer than this, and the watchdog still bounds a command that
// nobody is waiting for.
const defaultPreemptTimeout = 640 * time.Millisecond

// ANCHOR: shutdown

// shutdownBound is how long the daemon gives Close after SIGTERM: every
// client's connection closed, its channels off their engines, its memory
// reclaimed, the device stopped. Every wait in that is bounded below it
// (package driver's rule), so Close normally takes milliseconds; if it
// has not returned by then, or a second signal comes, the daemon exits
// anyway, status 1, its node and pid file removed: the kernel reclaims
// every page and descriptor a client shared with it.
const shutdownBound = 10 * time.Second

// shutdown closes the server within shutdownBound and returns the exit
// status: status, or 1 if closing failed or did not finish.
func shutdown(s *server.Server, log *slog.Logger, signals <-chan os.Signal, status int) int {
	defer removePid(s.Node())
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			log.Error("closing the device", "err", err)
			return 1
		}
		return status
	case <-time.After(shutdownBound):
		log.Error("shutdown did not finish in its bound; exiting with it unfinished", "bound", shutdownBound)
	case sig := <-signals:
		log.Error("second signal during shutdown; exiting with it unfinished", "signal", sig.String())
	}
	os.Remove(s.Node())
	return 1
}

// ANCHOR_END: shutdown
