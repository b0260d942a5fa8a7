// Command stages works on the stage modules as a set:
//
//	go run ./tools/cmd/stages list                      stages in build order, predecessors, which exist
//	go run ./tools/cmd/stages diff stage4-nolock stage7-idle   normalised diff (module paths set aside)
//	go run ./tools/cmd/stages diff -stat stage7-idle    its predecessor vs it, as a diffstat
//	go run ./tools/cmd/stages new stage2-fence          start a stage as a renamed copy of its predecessor
//	go run ./tools/cmd/stages forward stage1-ring       apply stage1-ring's uncommitted change to later stages
//	go run ./tools/cmd/stages check                     the rules CI enforces (go.mod, go.work, benchmark names)
//
// See tools/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

const usageText = `usage: go run ./tools/cmd/stages COMMAND [flags] [args]

commands:
  list                   stages in build order, each with its predecessor and whether it exists
  diff [-stat] [A] B     normalised diff from A to B (default A: B's predecessor in build order)
  new STAGE              create STAGE as a copy of its predecessor, module path renamed; add it to go.work
  forward [-check] STAGE apply STAGE's uncommitted change (git diff HEAD) to every later stage;
                         -check only reports what would not apply
  check                  go.mod files, go.work, and benchmark names kept from stage to stage
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return cli.ExitUsage
	}
	cmd, args := args[0], args[1:]
	if cmd == "-h" || cmd == "-help" || cmd == "--help" || cmd == "help" {
		fmt.Fprint(stdout, usageText)
		return cli.ExitOK
	}
	root, err := stages.Root()
	if err != nil {
		fmt.Fprintf(stderr, "stages: %v\n", err)
		return cli.ExitFailed
	}
	c := &command{ctx: ctx, root: root, stdout: stdout, stderr: stderr}
	switch cmd {
	case "list":
		return c.list(args)
	case "diff":
		return c.diff(args)
	case "new":
		return c.newStage(args)
	case "forward":
		return c.forward(args)
	case "check":
		return c.check(args)
	}
	fmt.Fprintf(stderr, "stages: unknown command %q\n\n%s", cmd, usageText)
	return cli.ExitUsage
}

type command struct {
	ctx            context.Context
	root           string
	stdout, stderr io.Writer
}

// parse parses flags given anywhere among the arguments ("diff A B -stat"
// as well as "diff -stat A B") and checks the count of the others.
func (c *command) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, bool) {
	fs.SetOutput(c.stderr)
	var flags, rest []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			flags = append(flags, a)
		} else {
			rest = append(rest, a)
		}
	}
	if err := fs.Parse(flags); err != nil {
		return nil, false
	}
	if len(rest) < minArgs || len(rest) > maxArgs {
		fmt.Fprintf(c.stderr, "stages %s: wrong number of arguments %q\n\n%s", fs.Name(), rest, usageText)
		return nil, false
	}
	return rest, true
}

func (c *command) fail(err error) int {
	if c.ctx.Err() != nil {
		fmt.Fprintf(c.stderr, "stages: interrupted\n")
		return cli.ExitInterrupted
	}
	fmt.Fprintf(c.stderr, "%v\n", err)
	return cli.ExitFailed
}

func (c *command) list(args []string) int {
	if _, ok := c.parse(flag.NewFlagSet("list", flag.ContinueOnError), args, 0, 0); !ok {
		return cli.ExitUsage
	}
	exists := map[string]bool{}
	for _, s := range stages.Existing(c.root) {
		exists[s.Dir] = true
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "build\tstage\tpredecessor\texists")
	for _, s := range stages.Order {
		pred, have := s.Predecessor, "no"
		if pred == "" {
			pred = "-"
		}
		if exists[s.Dir] {
			have = "yes"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Build, s.Dir, pred, have)
	}
	w.Flush()
	return cli.ExitOK
}

func (c *command) diff(args []string) int {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	stat := fs.Bool("stat", false, "print a diffstat instead of the diff")
	rest, ok := c.parse(fs, args, 1, 2)
	if !ok {
		return cli.ExitUsage
	}
	a, b := "", rest[len(rest)-1]
	if len(rest) == 2 {
		a = rest[0]
	} else {
		s, ok := stages.Lookup(b)
		if !ok || s.Predecessor == "" {
			fmt.Fprintf(c.stderr, "stages diff: %s has no predecessor in build order; name both stages: diff A B\n", b)
			return cli.ExitUsage
		}
		a = s.Predecessor
	}
	for _, s := range []string{a, b} {
		if err := stages.CheckExists(c.root, s); err != nil {
			fmt.Fprintf(c.stderr, "stages diff: %v\n", err)
			return cli.ExitUsage
		}
	}
	d, err := stages.DiffStages(c.root, a, b)
	if err != nil {
		return c.fail(err)
	}
	if *stat {
		fmt.Fprint(c.stdout, d.Stat())
	} else {
		fmt.Fprint(c.stdout, d.Unified)
	}
	return cli.ExitOK
}

func (c *command) newStage(args []string) int {
	rest, ok := c.parse(flag.NewFlagSet("new", flag.ContinueOnError), args, 1, 1)
	if !ok {
		return cli.ExitUsage
	}
	n, err := stages.NewStage(c.ctx, c.root, rest[0])
	if err != nil {
		return c.fail(err)
	}
	s, _ := stages.Lookup(rest[0])
	fmt.Fprintf(c.stdout, "stages: made %s from %s (%d files, module path renamed to %s) and added it to go.work\n",
		s.Dir, s.Predecessor, n, stages.ModulePath(s.Dir))
	return cli.ExitOK
}

func (c *command) forward(args []string) int {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	check := fs.Bool("check", false, "only report what would not apply; change nothing")
	rest, ok := c.parse(fs, args, 1, 1)
	if !ok {
		return cli.ExitUsage
	}
	results, err := stages.Forward(c.ctx, c.root, rest[0], *check)
	if err != nil {
		return c.fail(err)
	}
	if len(results) == 0 {
		fmt.Fprintf(c.stdout, "stages: no existing stage comes after %s in build order; nothing to do\n", rest[0])
		return cli.ExitOK
	}
	verb := "applied"
	if *check {
		verb = "applies"
	}
	failed := 0
	for _, r := range results {
		if len(r.Problems) == 0 {
			fmt.Fprintf(c.stdout, "%s: %s cleanly\n", r.Stage, verb)
			continue
		}
		failed++
		fmt.Fprintf(c.stdout, "%s: %d %s did not apply:\n", r.Stage, len(r.Problems), plural(len(r.Problems), "hunk or file", "hunks or files"))
		for _, p := range r.Problems {
			fmt.Fprintf(c.stdout, "  %s\n", p)
		}
	}
	if failed > 0 {
		fmt.Fprintf(c.stderr, "stages forward: %d of %d later stages need the change by hand (see above)\n", failed, len(results))
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func (c *command) check(args []string) int {
	if _, ok := c.parse(flag.NewFlagSet("check", flag.ContinueOnError), args, 0, 0); !ok {
		return cli.ExitUsage
	}
	problems, err := stages.Check(c.ctx, c.root, c.stderr)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return c.fail(err)
		}
		return c.fail(fmt.Errorf("stages check: %w", err))
	}
	if len(problems) > 0 {
		fmt.Fprintf(c.stdout, "stages check: %d %s:\n", len(problems), plural(len(problems), "problem", "problems"))
		for _, p := range problems {
			fmt.Fprintf(c.stdout, "  %s\n", p)
		}
		return cli.ExitFailed
	}
	fmt.Fprintf(c.stdout, "stages check: ok (%d stages)\n", len(stages.Existing(c.root)))
	return cli.ExitOK
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
