// Command trace reads, checks, summarises and draws the device-side traces
// softgpu's stages write (Chrome trace-event JSON, which Perfetto and
// chrome://tracing open), and makes the small traces the book commits:
//
//	go run ./tools/cmd/trace summary FILE.json          per-engine busy/asleep/idle time, wake latencies, counts
//	go run ./tools/cmd/trace check FILE.json            validate against the trace-event format; exit 1 if not
//	go run ./tools/cmd/trace svg -first 50 FILE.json > out.svg
//	go run ./tools/cmd/trace make -stage stage7-idle -bench '^BenchmarkGap/idle=sleep/gap=100us$' -name gap-sleep
//
// make runs one stage's benchmark with SOFTGPU_TRACE set and writes
// book/traces/NAME.json and NAME.meta.json (package tracemake, which
// record -retake runs too). The format, and what check verifies, are in
// package softgpu/tools/internal/trace. Flags may come before or after the
// arguments. See tools/README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/trace"
	"softgpu/tools/internal/tracemake"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usageText = `usage: go run ./tools/cmd/trace COMMAND [flags] [FILE.json]

commands:
  summary FILE.json       per-engine busy, asleep and idle-awake time, wake latency,
                          commands, doorbells, interrupts and event counts
  check FILE.json         validate against the trace-event format; exit 1 listing the problems
  svg [flags] FILE.json   draw a timeline as SVG on stdout: -from US -to US, or -first US
  make -stage STAGE -bench REGEXP -name NAME [flags]
                          run one benchmark of STAGE with SOFTGPU_TRACE set and write
                          book/traces/NAME.json and NAME.meta.json

Flags may come before or after the arguments. Run "trace COMMAND -h" for a command's details.
`

// subcommands, in the order the usage lists them.
var subcommands = []cli.Subcommand{
	{Name: "summary", Usage: `usage: go run ./tools/cmd/trace summary FILE.json

Prints, for each engine, its busy time (commands), time asleep and time
awake with nothing to run, over the trace's span; its commands by opcode and
status; the wake latency of its sleeps (p50, p99, max); then each track's
doorbells and interrupts, and every event counted by category and name.
`, Run: summary},
	{Name: "check", Usage: `usage: go run ./tools/cmd/trace check FILE.json

Checks FILE.json against the trace-event format's documented fields and
softgpu's contract (events sorted by ts, slices nested on each track). Exits
0 if it is valid, 1 listing every problem by event index and field.
`, Run: check},
	{Name: "svg", Usage: `usage: go run ./tools/cmd/trace svg [-from US] [-to US] [-first US] [-title T] [-caption C] FILE.json > out.svg

Draws FILE.json as an SVG timeline, one lane per track, on stdout. The
window is in µs of device time; by default the whole trace. The caption
defaults to the provenance in NAME.meta.json beside the trace, if there is one.
`, Run: svg},
	tracemake.Make,
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.RunSubcommand(ctx, "trace", usageText, subcommands, args, stdout, stderr)
}

// parseFile parses a command's flags and takes its one FILE.json. When
// done, the command returns code.
func parseFile(c *cli.Command, args []string) (file string, code int, done bool) {
	rest, code, done := c.Parse(args)
	switch {
	case done:
		return "", code, true
	case len(rest) == 0:
		return "", c.Misuse("want a trace FILE.json"), true
	case len(rest) > 1:
		return "", c.Misuse("want one trace FILE.json, got %d arguments: %q", len(rest), rest), true
	}
	return rest[0], cli.ExitOK, false
}

func summary(_ context.Context, c *cli.Command, args []string) int {
	file, code, done := parseFile(c, args)
	if done {
		return code
	}
	t, err := load(file)
	if err != nil {
		return c.Fail(err)
	}
	if err := trace.Summarise(t).Format(c.Stdout); err != nil {
		return c.Fail(err)
	}
	return cli.ExitOK
}

func check(_ context.Context, c *cli.Command, args []string) int {
	file, code, done := parseFile(c, args)
	if done {
		return code
	}
	t, err := load(file)
	if err != nil {
		return c.Fail(err) // every problem, one per line
	}
	stage := t.Stage
	if stage == "" {
		stage = "no stage named"
	}
	fmt.Fprintf(c.Stdout, "%s: %s: ok (%s, %d events on %d tracks, %d dropped)\n", c.Name, file, stage, len(t.Events), len(t.Tracks), t.Dropped)
	return cli.ExitOK
}

func svg(_ context.Context, c *cli.Command, args []string) int {
	var opt trace.TimelineOptions
	c.Flags.Float64Var(&opt.From, "from", 0, "window start in `µs` of device time (default: the first event's start)")
	c.Flags.Float64Var(&opt.To, "to", 0, "window end in `µs` of device time (default: the last event's end)")
	c.Flags.Float64Var(&opt.First, "first", 0, "draw the first `US` µs after the first event, instead of -from and -to")
	title := c.Flags.String("title", "", "the `title` (default: the stage and the file's name)")
	caption := c.Flags.String("caption", "", "the `caption` (default: the provenance in NAME.meta.json beside the trace)")
	file, code, done := parseFile(c, args)
	if done {
		return code
	}
	for _, v := range []struct {
		name string
		us   float64
	}{{"-from", opt.From}, {"-to", opt.To}, {"-first", opt.First}} {
		if err := trace.CheckWindowMicros(v.name, v.us); err != nil {
			return c.Misuse("%v", err)
		}
	}
	switch {
	case opt.From < 0 || opt.To < 0 || opt.First < 0:
		return c.Misuse("-from %v, -to %v, -first %v: want none negative", opt.From, opt.To, opt.First)
	case opt.First > 0 && (opt.From != 0 || opt.To != 0):
		return c.Misuse("-first with -from or -to: give one or the other")
	case opt.To != 0 && opt.To <= opt.From:
		return c.Misuse("-to %v is not after -from %v", opt.To, opt.From)
	}
	t, err := load(file)
	if err != nil {
		return c.Fail(err)
	}
	opt.Title, opt.Caption = *title, *caption
	if opt.Title == "" && t.Stage != "" {
		opt.Title = t.Stage + ": " + strings.TrimSuffix(filepath.Base(file), ".json")
	}
	if opt.Caption == "" {
		if meta, err := trace.LoadMeta(trace.MetaPath(file)); err == nil {
			opt.Caption = meta.Caption(filepath.Base(file))
		}
	}
	out, err := trace.RenderSVG(t, opt)
	if errors.Is(err, trace.ErrWindow) {
		return c.Misuse("%v", err)
	}
	if err != nil {
		return c.Fail(err)
	}
	if _, err := io.WriteString(c.Stdout, out); err != nil {
		return c.Fail(err)
	}
	return cli.ExitOK
}

// load reads a trace for a sub-command. The package's errors start
// "trace: ", which the command's own prefix ("trace summary: ") already
// says.
func load(file string) (*trace.Trace, error) {
	t, err := trace.Load(file)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "trace: "))
	}
	return t, nil
}
