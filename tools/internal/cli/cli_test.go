package cli

import (
	"context"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestQuote(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "-benchtime=100ms", "-benchtime=100ms"},
		{"regexp", "^BenchmarkBaseline$/^pingpong$", `'^BenchmarkBaseline$/^pingpong$'`},
		{"space", "a b", "'a b'"},
		{"quote", "it's", `'it'\''s'`},
		{"empty", "", "''"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%q) = %s; want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestEnvFlag(t *testing.T) {
	var e EnvFlag
	for _, kv := range []string{"SOFTGPU_IDLE=spin", "EMPTY="} {
		if err := e.Set(kv); err != nil {
			t.Errorf("Set(%q) = %v; want nil", kv, err)
		}
	}
	for _, bad := range []string{"NOEQUALS", "=x", "A B=1"} {
		if err := e.Set(bad); err == nil {
			t.Errorf("Set(%q) = nil; want an error", bad)
		}
	}
	if want := (EnvFlag{"SOFTGPU_IDLE=spin", "EMPTY="}); !reflect.DeepEqual(e, want) {
		t.Errorf("after Set: %q; want %q", e, want)
	}
}

// TestSignalContext sends each stopping signal to the test process itself
// and checks the context ends with that signal as its cause and the exit
// code a shell would report.
func TestSignalContext(t *testing.T) {
	tests := []struct {
		sig      syscall.Signal
		wantCode int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
		{syscall.SIGHUP, 129},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			ctx, stop := SignalContext()
			defer stop()
			if err := syscall.Kill(os.Getpid(), tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("%v did not end the context", tt.sig)
			}
			if code := InterruptedCode(ctx); code != tt.wantCode {
				t.Errorf("InterruptedCode after %v = %d; want %d (cause %v)", tt.sig, code, tt.wantCode, context.Cause(ctx))
			}
		})
	}
	ctx, stop := SignalContext()
	stop()
	if code := InterruptedCode(ctx); code != ExitInterrupted {
		t.Errorf("InterruptedCode after stop = %d; want %d", code, ExitInterrupted)
	}
}

func TestCommandLine(t *testing.T) {
	got := CommandLine("go run ./tools/cmd/record", []string{"-name", "x", "-bench", "^BenchmarkGap$"})
	if want := "go run ./tools/cmd/record -name x -bench '^BenchmarkGap$'"; got != want {
		t.Errorf("CommandLine = %s; want %s", got, want)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\n  b\tc\n"); got != "a b c" {
		t.Errorf("oneLine = %q; want %q", got, "a b c")
	}
	if got := strings.Count(oneLine("x\ny"), "\n"); got != 0 {
		t.Errorf("oneLine kept %d newlines", got)
	}
}
