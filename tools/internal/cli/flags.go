package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command is one command, or one sub-command of stages: its name as
// messages give it, its usage text, its flags and where it reports.
type Command struct {
	Name   string // "record", "stages diff": every message starts "Name: "
	Usage  string // what -h prints before the flags: a usage line, then what the command does
	Flags  *flag.FlagSet
	Stdout io.Writer
	Stderr io.Writer
}

// NewCommand returns a command with an empty flag set; define its flags on
// Flags before calling Parse.
func NewCommand(name, usage string, stdout, stderr io.Writer) *Command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse reports errors itself, in one line
	fs.Usage = func() {}
	return &Command{Name: name, Usage: usage, Flags: fs, Stdout: stdout, Stderr: stderr}
}

// Parse parses args with flags anywhere among the positional arguments —
// before, between or after them, as `stages diff A B -stat` — until a
// "--", after which everything is positional. It returns the positional
// arguments in order. When done is true the command must return code at
// once: ExitOK after -h or -help printed the usage on stdout, ExitUsage
// after one line on stderr named the bad flag or value.
func (c *Command) Parse(args []string) (rest []string, code int, done bool) {
	for {
		err := c.Flags.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.PrintUsage(c.Stdout)
			return nil, ExitOK, true
		}
		if err != nil {
			return nil, c.Misuse("%v", err), true
		}
		remaining := c.Flags.Args()
		if len(remaining) == 0 {
			return rest, ExitOK, false
		}
		if consumed := len(args) - len(remaining); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, remaining...), ExitOK, false
		}
		rest = append(rest, remaining[0])
		args = remaining[1:]
	}
}

// PrintUsage writes the usage text and, if the command has flags, their
// defaults.
func (c *Command) PrintUsage(w io.Writer) {
	io.WriteString(w, c.Usage)
	if !strings.HasSuffix(c.Usage, "\n") {
		io.WriteString(w, "\n")
	}
	n := 0
	c.Flags.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	io.WriteString(w, "\nflags:\n")
	c.Flags.SetOutput(w)
	c.Flags.PrintDefaults()
	c.Flags.SetOutput(io.Discard)
}

// Misuse reports a bad invocation as one line on stderr, "Name: message",
// and returns ExitUsage.
func (c *Command) Misuse(format string, a ...any) int {
	fmt.Fprintf(c.Stderr, "%s: %s\n", c.Name, oneLine(fmt.Sprintf(format, a...)))
	return ExitUsage
}

// Fail reports that the work failed, "Name: error", and returns
// ExitFailed.
func (c *Command) Fail(err error) int {
	fmt.Fprintf(c.Stderr, "%s: %v\n", c.Name, err)
	return ExitFailed
}

// Printf writes "Name: message" and a newline to stderr: progress and
// notes.
func (c *Command) Printf(format string, a ...any) {
	fmt.Fprintf(c.Stderr, "%s: %s\n", c.Name, fmt.Sprintf(format, a...))
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
