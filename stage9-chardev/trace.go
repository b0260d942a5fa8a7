package softgpu

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"softgpu/stage9-chardev/trace"
)

// Tracing. With Config.Trace (or SOFTGPU_TRACE) set, the device records
// what its engines do — each command, each doorbell it sees, each fault —
// in a ring of the latest TraceEvents events, and Close writes them as
// Chrome trace-event JSON: open the file in Perfetto (ui.perfetto.dev) or
// chrome://tracing to see a timeline with one track per engine and per
// channel, or summarise it with `go run ./tools/cmd/trace summary FILE`
// from the repository root.

// stageName is this module's last path element, the stage a trace came
// from (derived, so a copied-out stage names itself).
var stageName = func() string {
	path := reflect.TypeFor[GPU]().PkgPath()
	return path[strings.LastIndex(path, "/")+1:]
}()

// openTrace sets up tracing for Open, if the config or the environment asks
// for it.
func (g *GPU) openTrace(cfg Config) error {
	if err := traceEnv(&cfg); err != nil {
		return err
	}
	if cfg.Trace == "" {
		return nil
	}
	if dir := filepath.Dir(cfg.Trace); dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: Trace %q: %s is not a directory", ErrConfig, cfg.Trace, dir)
		}
	}
	g.trace, g.tracePath = trace.New(cfg.TraceEvents), cfg.Trace
	return nil
}

// ErrNotTracing reports a WriteTrace on a GPU opened without tracing.
var ErrNotTracing = errors.New("softgpu: tracing is off")

// WriteTrace writes the trace to w as trace-event JSON. It must be called
// after Close (the events are read without a lock, so every writer must be
// done); Close also writes it to Config.Trace by itself.
func (g *GPU) WriteTrace(w io.Writer) error {
	if g.trace == nil {
		return ErrNotTracing
	}
	if !g.drv.Closed() {
		return fmt.Errorf("softgpu: WriteTrace before Close")
	}
	return g.trace.WriteJSON(w, stageName)
}

// writeTraceFile writes the trace to path, through a temporary file so that
// a reader never sees half a trace.
func (g *GPU) writeTraceFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".trace-*")
	if err != nil {
		return fmt.Errorf("softgpu: writing the trace: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := g.WriteTrace(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("softgpu: writing the trace: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}
