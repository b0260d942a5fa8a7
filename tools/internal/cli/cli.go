// Package cli holds what the measuring commands (record, compare) share:
// the repeatable -env flag, a context that ends on SIGINT or SIGTERM, and
// the shell-quoted command line a record keeps.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

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
