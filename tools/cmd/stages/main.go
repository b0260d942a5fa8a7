// Command stages works on the stage modules as a set:
//
//	go run ./tools/cmd/stages list                      stages in build order, predecessors, which exist
//	go run ./tools/cmd/stages diff stage4-nolock stage7-idle   normalised diff (module paths set aside)
//	go run ./tools/cmd/stages diff -stat stage7-idle    its predecessor vs it, as a diffstat
//	go run ./tools/cmd/stages diff stage7-idle driver   only the files under driver/
//	go run ./tools/cmd/stages new stage2-fence          start a stage as a renamed copy of its predecessor
//	go run ./tools/cmd/stages forward stage1-ring       apply stage1-ring's uncommitted change to later stages
//	go run ./tools/cmd/stages check                     the rules CI enforces (go.mod, go.work, benchmark names)
//
// Flags may come before or after the arguments. -h prints a sub-command's
// usage. See tools/README.md.
package main

import (
	"context"
	"errors"
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
  list                    stages in build order, each with its predecessor and whether it exists
  diff [-stat] [-path P]... [A] B [P...]
                          normalised diff from A to B (default A: B's predecessor in build order),
                          limited to the files under the paths P if any are given
  new STAGE               create STAGE as a copy of its predecessor, module path and README title
                          renamed; add it to go.work
  forward [-check] STAGE  apply STAGE's uncommitted change (git diff HEAD) to every later stage;
                          -check only reports what would not apply
  check                   go.mod files, go.work, and benchmark names kept from stage to stage

Flags may come before or after the arguments. Run "stages COMMAND -h" for a command's details.
`

// subcommands, in the order the usage lists them.
var subcommands = []cli.Subcommand{
	{Name: "list", Usage: `usage: go run ./tools/cmd/stages list

Prints the ten stages in build order, each with its predecessor and whether
its directory exists.
`, Run: withCommand((*command).list)},
	{Name: "diff", Usage: `usage: go run ./tools/cmd/stages diff [-stat] [-path PATH]... [A] B [PATH...]

Prints the diff from stage A to stage B (A defaults to B's predecessor in
build order), each stage's module path set aside so that only the mechanism
shows. PATHs (with -path, or after the stages) limit it to those files or
directories, relative to the stage: "driver", "README.md". It refuses to run
while either stage holds a file git neither tracks nor ignores.
`, Run: withCommand((*command).diff)},
	{Name: "new", Usage: `usage: go run ./tools/cmd/stages new STAGE

Creates STAGE as a copy of its predecessor in build order, with the module
path renamed everywhere and the README's title naming STAGE, and adds it to
go.work and, in a git work tree, to git's index with intent to add (git add
-N), so that diff and forward take it at once.
`, Run: withCommand((*command).newStage)},
	{Name: "forward", Usage: `usage: go run ./tools/cmd/stages forward [-check] STAGE

Applies STAGE's uncommitted change (git diff HEAD; add new files with git add
or git add -N) to every later existing stage in build order, each with its own
module path. Hunks that do not apply are listed and left in .rej files. It
refuses to run while STAGE holds a file git neither tracks nor ignores.
`, Run: withCommand((*command).forward)},
	{Name: "check", Usage: `usage: go run ./tools/cmd/stages check

Checks the rules CI enforces: every stage's go.mod stands alone, go.work
uses every stage, and every benchmark name of a stage exists in its
successor.
`, Run: withCommand((*command).check)},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.RunSubcommand(ctx, "stages", usageText, subcommands, args, stdout, stderr)
}

// command is one sub-command being run.
type command struct {
	*cli.Command
	ctx  context.Context
	root string
}

// withCommand turns a sub-command's method into a cli.Subcommand's Run,
// giving it the command with its context.
func withCommand(run func(*command, []string) int) func(context.Context, *cli.Command, []string) int {
	return func(ctx context.Context, c *cli.Command, args []string) int {
		return run(&command{Command: c, ctx: ctx}, args)
	}
}

// parse parses the sub-command's flags (defined on c.Flags beforehand),
// checks the count of the other arguments and finds the repository root.
// When done, the sub-command returns code.
func (c *command) parse(args []string, minArgs, maxArgs int, want string) (rest []string, code int, done bool) {
	rest, code, done = c.Parse(args)
	if done {
		return nil, code, true
	}
	if len(rest) < minArgs || maxArgs >= 0 && len(rest) > maxArgs {
		return nil, c.Misuse("want %s, got %s", want, describeArgs(rest)), true
	}
	root, err := stages.Root()
	if err != nil {
		return nil, c.Fail(err), true
	}
	c.root = root
	return rest, cli.ExitOK, false
}

func describeArgs(args []string) string {
	if len(args) == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", args)
}

// fail reports an error from the work: misuse if it is about what the user
// typed, an interruption if ctx ended, a failure otherwise.
func (c *command) fail(err error) int {
	switch {
	case c.ctx.Err() != nil:
		c.Printf("interrupted")
		return cli.ExitInterrupted
	case errors.Is(err, stages.ErrName), errors.Is(err, stages.ErrPath):
		return c.Misuse("%v", err)
	}
	return c.Fail(err)
}

func (c *command) list(args []string) int {
	if _, code, done := c.parse(args, 0, 0, "no arguments"); done {
		return code
	}
	exists := map[string]bool{}
	for _, s := range stages.Existing(c.root) {
		exists[s.Dir] = true
	}
	w := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
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

// pathList is a repeatable -path flag.
type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, " ") }
func (p *pathList) Set(s string) error { *p = append(*p, s); return nil }

// looksLikeStage reports whether a diff argument after the first is meant
// as a stage rather than a path: one of the ten names, or a misspelling of
// one ("stage1-rng"), which then gets "unknown stage" rather than "no such
// path".
func looksLikeStage(arg string) bool {
	if _, ok := stages.Lookup(arg); ok {
		return true
	}
	return strings.HasPrefix(arg, "stage") && !strings.ContainsAny(arg, "/.")
}

func (c *command) diff(args []string) int {
	stat := c.Flags.Bool("stat", false, "print a diffstat instead of the diff")
	var paths pathList
	c.Flags.Var(&paths, "path", "only files under `PATH`, a file or directory relative to the stage (repeatable)")
	rest, code, done := c.parse(args, 1, -1, "[A] B [PATH...]")
	if done {
		return code
	}
	stageArgs := rest[:1]
	if len(rest) > 1 && looksLikeStage(rest[1]) {
		stageArgs = rest[:2]
	}
	paths = append(paths, rest[len(stageArgs):]...)
	for i, s := range stageArgs {
		if err := stages.CheckKnown(s); err != nil {
			return c.Misuse("%v", err)
		}
		stageArgs[i] = stages.Clean(s)
	}
	a, b := "", stageArgs[len(stageArgs)-1]
	if len(stageArgs) == 2 {
		a = stageArgs[0]
	} else {
		s, _ := stages.Lookup(b)
		if s.Predecessor == "" {
			return c.Misuse("%s is the first stage in build order and has no predecessor; name both stages: diff A B", b)
		}
		a = s.Predecessor
	}
	for _, s := range []string{a, b} {
		if err := stages.CheckExists(c.root, s); err != nil {
			return c.Misuse("%v", err)
		}
	}
	if err := stages.CheckTracked(c.ctx, c.root, a, b); err != nil {
		return c.fail(err)
	}
	d, err := stages.DiffPaths(c.root, a, b, paths)
	if err != nil {
		return c.fail(err)
	}
	if *stat {
		fmt.Fprint(c.Stdout, d.Stat())
	} else {
		fmt.Fprint(c.Stdout, d.Unified)
	}
	return cli.ExitOK
}

func (c *command) newStage(args []string) int {
	rest, code, done := c.parse(args, 1, 1, "one stage")
	if done {
		return code
	}
	n, err := stages.NewStage(c.ctx, c.root, stages.Clean(rest[0]))
	if err != nil {
		return c.fail(err)
	}
	s, _ := stages.Lookup(rest[0])
	fmt.Fprintf(c.Stdout, "stages: made %s from %s (%d files, module path renamed to %s, README retitled) and added it to go.work (and, in git, with git add -N)\n",
		s.Dir, s.Predecessor, n, stages.ModulePath(s.Dir))
	return cli.ExitOK
}

func (c *command) forward(args []string) int {
	check := c.Flags.Bool("check", false, "only report what would not apply; change nothing")
	rest, code, done := c.parse(args, 1, 1, "one stage")
	if done {
		return code
	}
	if err := stages.CheckExists(c.root, rest[0]); err != nil {
		return c.Misuse("%v", err)
	}
	rest[0] = stages.Clean(rest[0])
	results, err := stages.Forward(c.ctx, c.root, rest[0], *check)
	if err != nil {
		return c.fail(err)
	}
	if len(results) == 0 {
		fmt.Fprintf(c.Stdout, "stages: no existing stage comes after %s in build order; nothing to do\n", rest[0])
		return cli.ExitOK
	}
	verb := "applied"
	if *check {
		verb = "applies"
	}
	failed := 0
	for _, r := range results {
		if len(r.Problems) == 0 {
			fmt.Fprintf(c.Stdout, "%s: %s cleanly\n", r.Stage, verb)
			continue
		}
		failed++
		fmt.Fprintf(c.Stdout, "%s: %d %s did not apply:\n", r.Stage, len(r.Problems), plural(len(r.Problems), "hunk or file", "hunks or files"))
		for _, p := range r.Problems {
			fmt.Fprintf(c.Stdout, "  %s\n", p)
		}
	}
	if failed > 0 {
		c.Printf("%d of %d later stages need the change by hand (see above)", failed, len(results))
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func (c *command) check(args []string) int {
	if _, code, done := c.parse(args, 0, 0, "no arguments"); done {
		return code
	}
	problems, err := stages.Check(c.ctx, c.root, c.Stderr)
	if err != nil {
		return c.fail(err)
	}
	if len(problems) > 0 {
		fmt.Fprintf(c.Stdout, "stages check: %d %s:\n", len(problems), plural(len(problems), "problem", "problems"))
		for _, p := range problems {
			fmt.Fprintf(c.Stdout, "  %s\n", p)
		}
		return cli.ExitFailed
	}
	fmt.Fprintf(c.Stdout, "stages check: ok (%d stages)\n", len(stages.Existing(c.root)))
	return cli.ExitOK
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
