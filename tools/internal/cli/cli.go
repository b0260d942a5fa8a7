// Package cli holds what the tools' commands (record, compare, stages)
// share: their exit codes, flag parsing with -h, the way they report misuse,
// the repeatable -env flag, a context that ends on SIGINT or SIGTERM, and
// the shell-quoted command line a record keeps.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes of the commands.
const (
	ExitOK          = 0   // done
	ExitFailed      = 1   // the work itself failed
	ExitUsage       = 2   // bad flags or arguments: nothing was done
	ExitInterrupted = 130 // SIGINT or SIGTERM: nothing was written
)

// Main runs a command's body with a context that SIGINT or SIGTERM ends,
// and exits with the code the body returns.
func Main(run func(ctx context.Context) int) {
	ctx, stop := SignalContext()
	code := run(ctx)
	stop()
	os.Exit(code)
}

// ParseFlags parses args with fs (made with flag.ContinueOnError). When it
// returns done, the command returns code at once: ExitOK after -h printed
// the usage, ExitUsage after the flag package printed what was wrong.
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

// Misuse returns how command name reports a bad invocation: it prints
// "name: message" and a pointer to -h on w, and returns ExitUsage.
func Misuse(w io.Writer, name string) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(w, name+": "+format+"\n", a...)
		fmt.Fprintf(w, "run with -h for usage\n")
		return ExitUsage
	}
}

// EnvFlag collects repeated -env KEY=VALUE flags.
type EnvFlag []string

func (e *EnvFlag) String() string { return strings.Join(*e, " ") }

// Set checks one KEY=VALUE and appends it.
func (e *EnvFlag) Set(kv string) error {
	key, _, ok := strings.Cut(kv, "=")
	if !ok || key == "" || strings.ContainsAny(key, " \t") {
		return fmt.Errorf("want KEY=VALUE, got %q", kv)
	}
	*e = append(*e, kv)
	return nil
}

// SignalContext returns a context cancelled by SIGINT or SIGTERM. Children
// started with exec.CommandContext are killed when it ends.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// CommandLine renders a command as a shell would need it typed: prefix
// (e.g. "go run ./tools/cmd/record") then each argument, single-quoted when
// it holds anything a shell would interpret.
func CommandLine(prefix string, args []string) string {
	parts := []string{prefix}
	for _, a := range args {
		parts = append(parts, Quote(a))
	}
	return strings.Join(parts, " ")
}

// Quote quotes s for a POSIX shell if it needs quoting.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,:@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
