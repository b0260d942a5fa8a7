package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// This file defines NAME.meta.json, which `trace make` writes beside each
// trace it commits under book/traces/: how the trace was made, so that a
// timeline in the book can say which command, commit and machine produced
// it, and a reader can make it again.

// Meta is the provenance of a committed trace.
type Meta struct {
	Command    string   `json:"command"`              // the command that made it, shell-quoted, without its -out
	Stage      string   `json:"stage"`                // the stage directory whose benchmark ran
	Bench      string   `json:"bench"`                // the -bench regexp
	Benchtime  string   `json:"benchtime"`            // the -benchtime
	Env        []string `json:"env,omitempty"`        // -env KEY=VALUE settings, SOFTGPU_TRACE aside
	Benchmarks []string `json:"benchmarks,omitempty"` // the benchmarks that ran; the trace is the last device's
	Commit     string   `json:"commit"`               // git rev-parse HEAD, "+dirty" if made with -allow-dirty from a changed tree
	Date       string   `json:"date"`                 // RFC 3339, when the run started
	Machine    Machine  `json:"machine"`
}

// Machine is the computer a trace was made on.
type Machine struct {
	CPU   string `json:"cpu"`   // model name from /proc/cpuinfo
	Cores int    `json:"cores"` // logical CPUs
	OS    string `json:"os,omitempty"`
	Go    string `json:"go"` // the Go version that built the benchmark
}

// MetaPath is the meta file beside the trace at tracePath:
// book/traces/NAME.json → book/traces/NAME.meta.json.
func MetaPath(tracePath string) string {
	return strings.TrimSuffix(tracePath, ".json") + ".meta.json"
}

// LoadMeta reads a meta file.
func LoadMeta(path string) (*Meta, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	var m Meta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("trace: %s: %w", path, err)
	}
	return &m, nil
}

// Caption is the sentence a timeline made from this trace carries: which
// trace file, which command and which commit.
func (m *Meta) Caption(traceFile string) string {
	s := "Trace " + traceFile + ", made by " + m.Command
	if hash, dirty := strings.CutSuffix(m.Commit, "+dirty"); hash != "" {
		s += " at commit " + hash[:min(len(hash), 12)]
		if dirty {
			s += " (with uncommitted changes)"
		}
	}
	return s + "."
}
