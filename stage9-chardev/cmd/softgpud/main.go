// Command softgpud owns a softgpu and serves it on a device node, a Unix
// socket, until SIGINT or SIGTERM:
//
//	go run ./stage9-chardev/cmd/softgpud                  # $XDG_RUNTIME_DIR/softgpu/card0
//	go run ./stage9-chardev/cmd/softgpud -node /tmp/card0 -mode 0660
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
	mem := flag.Uint64("mem", 0, "bytes of device memory (0: the device's default, 64 MiB)")
	verbose := flag.Bool("v", false, "log every refused call")
	idle := flag.Duration("idle-budget", server.DefaultIdleBudget*time.Nanosecond, "how long an idle engine spins before it sleeps (0: sleep at once)")
	traceFile := flag.String("trace", "", "write the device's trace to this file when the daemon stops (Chrome trace-event JSON; open it in ui.perfetto.dev)")
	var clientQuota, uidQuota server.Quota
	quotaFlags(flag.CommandLine, &clientQuota, &uidQuota)
	var priorityUIDs uidList
	flag.Var(&priorityUIDs, "priority-uids", "comma-separated uids, besides root, that may open channels above normal priority or with a timeslice")
	flag.Parse()
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
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	select {
	case sig := <-stop:
		log.Info("shutting down", "signal", sig.String())
	case err := <-done:
		log.Error("serving stopped", "err", err)
	}
	if err := s.Close(); err != nil {
		log.Error("closing the device", "err", err)
		os.Exit(1)
	}
}
