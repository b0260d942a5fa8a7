// Package cli holds what the tools' commands (record, compare, stages)
// share, so that they behave alike:
//
//   - exit codes: 0 done, 1 the work failed, 2 misuse (nothing was done),
//     128+n stopped by signal n (130 for Ctrl-C);
//   - flag parsing (Command): flags anywhere among the arguments, -h and
//     -help print the usage on stdout and exit 0, misuse is one line on
//     stderr naming the bad input, prefixed once with the command's name;
//   - signals (Main, SignalContext): SIGINT, SIGTERM and SIGHUP end the
//     command's context, which kills its children's process groups
//     (ExecGroup); a tool started by `go run` also stops when the go
//     command is killed;
//   - sub-commands (RunSubcommand): stages and trace choose one by their
//     first argument, list them on misuse and print their help alike;
//   - output directories (ClearDir): the book's site and bookcheck's
//     screenshots are emptied on every run, but only where a marker file
//     shows the command wrote them;
//   - the repeatable -env flag and the shell-quoted command line a record
//     keeps (CommandLine, without its -out: WithoutFlag).
package cli

import (
	"context"
	"errors"
	"fmt"
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
	ExitInterrupted = 130 // stopped by a signal (Main turns it into 128 + the signal's number)
)

// Main runs a command's body with a context that SIGINT, SIGTERM or SIGHUP
// ends, and exits with the code the body returns; ExitInterrupted becomes
// 128 + the number of the signal that arrived, as a shell reports it.
func Main(run func(ctx context.Context) int) {
	followGoRun()
	ctx, stop := SignalContext()
	code := run(ctx)
	if code == ExitInterrupted {
		code = InterruptedCode(ctx)
	}
	stop()
	os.Exit(code)
}

// Signals are the signals that stop a command cleanly.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// SignalError is the cause of a context that SignalContext ended.
type SignalError struct{ Signal os.Signal }

func (e *SignalError) Error() string { return "stopped by " + e.Signal.String() }

// SignalContext returns a context ended, with a *SignalError cause, by the
// first of Signals to arrive. After that first signal the signals are
// handled by default again, so a second Ctrl-C kills the command outright
// should cleaning up ever hang. Children started with ExecGroup are killed
// when the context ends.
func SignalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, Signals...)
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			cancel(&SignalError{Signal: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// InterruptedCode is the exit code for a command whose context ended:
// 128 + the signal's number when a signal ended it, ExitInterrupted
// otherwise.
func InterruptedCode(ctx context.Context) int {
	var se *SignalError
	if errors.As(context.Cause(ctx), &se) {
		if s, ok := se.Signal.(syscall.Signal); ok {
			return 128 + int(s)
		}
	}
	return ExitInterrupted
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

// WithoutFlag returns a copy of args without the flag -name (or --name):
// "-name=V" alone, or "-name" followed by its value when the flag takes
// one, or "-name" alone when it is boolean. Arguments after "--" are kept.
// A command writes its line without -out this way, so that the line a
// record keeps is the one a reader re-runs, not where its maker wrote.
//
// It reads every argument before "--" as a possible flag, so it assumes no
// other flag's value is spelled "-name": true of the commands the tools
// keep, whose values are names, regexps, durations, directories and
// KEY=VALUE.
func WithoutFlag(args []string, name string, takesValue bool) []string {
	kept := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(kept, args[i:]...)
		}
		bare, isFlag := strings.CutPrefix(a, "-")
		bare = strings.TrimPrefix(bare, "-")
		switch {
		case isFlag && bare == name:
			if takesValue {
				i++ // and its value
			}
		case isFlag && strings.HasPrefix(bare, name+"="):
		default:
			kept = append(kept, a)
		}
	}
	return kept
}

// Quote quotes s for a POSIX shell if it needs quoting.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,:@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
