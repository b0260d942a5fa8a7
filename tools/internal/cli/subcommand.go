package cli

import (
	"context"
	"io"
	"strings"
)

// Subcommand is one sub-command of a command that has several, as stages
// and trace have: the name that selects it, the usage its -h prints, and
// its body, which runs with a Command named after both.
type Subcommand struct {
	Name  string
	Usage string
	Run   func(ctx context.Context, c *Command, args []string) int
}

// RunSubcommand runs the sub-command of subs that args[0] names with the
// arguments after it, so that every command with sub-commands chooses one,
// prints its help and reports misuse alike. name and usage are the
// command's own: -h, -help, --help or help as args[0] prints usage on
// stdout and returns ExitOK; no argument, or a name not in subs, is misuse
// listing subs' names in order. The sub-command's Command is named
// "name sub", as in "stages diff: ...".
func RunSubcommand(ctx context.Context, name, usage string, subs []Subcommand, args []string, stdout, stderr io.Writer) int {
	top := NewCommand(name, usage, stdout, stderr)
	names := make([]string, 0, len(subs))
	for _, s := range subs {
		names = append(names, s.Name)
	}
	want := strings.Join(names, ", ")
	if len(args) == 0 {
		return top.Misuse("no command given; want one of %s", want)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		top.PrintUsage(stdout)
		return ExitOK
	}
	for _, s := range subs {
		if s.Name == sub {
			return s.Run(ctx, NewCommand(name+" "+sub, s.Usage, stdout, stderr), args)
		}
	}
	return top.Misuse("unknown command %q; want one of %s", sub, want)
}
