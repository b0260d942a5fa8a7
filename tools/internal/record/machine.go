package record

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"

	"softgpu/tools/internal/records"
)

// DetectMachine describes this computer: the CPU model from /proc/cpuinfo,
// the logical CPU count, the OS and kernel from uname, and the Go version
// that builds the benchmarks. What it cannot find it leaves generic rather
// than failing: a record from a machine without /proc is still a record.
func DetectMachine(ctx context.Context, label string) records.Machine {
	m := records.Machine{
		Label: label,
		CPU:   cpuModel(),
		Cores: runtime.NumCPU(),
		OS:    command(ctx, "uname", "-s"),
		Go:    command(ctx, "go", "env", "GOVERSION"),
	}
	if m.OS == "" {
		m.OS = runtime.GOOS
	}
	m.Kernel = command(ctx, "uname", "-r")
	if m.Go == "" {
		m.Go = runtime.Version()
	}
	return m
}

// cpuModel reads the first "model name" (x86) or, failing that, "Hardware"
// or "CPU part" line (Arm) of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	fallback := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name":
			return val
		case "Hardware", "CPU part":
			if fallback == "" {
				fallback = runtime.GOARCH + " " + key + " " + val
			}
		}
	}
	if fallback != "" {
		return fallback
	}
	return runtime.GOARCH
}
