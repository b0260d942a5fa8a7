package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags and Misuse are the old interface of record and compare, kept
// until they move to Command.

// ParseFlags parses args with fs.
//
// Deprecated: use Command.Parse.
func ParseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return ExitOK, false
	case errors.Is(err, flag.ErrHelp):
		return ExitOK, true
	}
	return ExitUsage, true
}

// Misuse reports a bad invocation.
//
// Deprecated: use Command.Misuse.
func Misuse(w io.Writer, name string) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(w, name+": "+format+"\n", a...)
		return ExitUsage
	}
}
