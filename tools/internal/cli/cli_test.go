package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.Equal(t, tt.want, Quote(tt.in), "Quote(%q)", tt.in)
		})
	}
}

func TestEnvFlag(t *testing.T) {
	var e EnvFlag
	for _, kv := range []string{"SOFTGPU_IDLE=spin", "EMPTY="} {
		assert.NoError(t, e.Set(kv), "Set(%q)", kv)
	}
	for _, bad := range []string{"NOEQUALS", "=x", "A B=1"} {
		assert.Error(t, e.Set(bad), "Set(%q)", bad)
	}
	assert.Equal(t, (EnvFlag{"SOFTGPU_IDLE=spin", "EMPTY="}), e, "after Set")
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
			require.NoError(t, syscall.Kill(os.Getpid(), tt.sig))
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("%v did not end the context", tt.sig)
			}
			assert.Equal(t, tt.wantCode, InterruptedCode(ctx), "InterruptedCode after %v; want %d (cause %v)", tt.sig, tt.wantCode, context.Cause(ctx))
		})
	}
	ctx, stop := SignalContext()
	stop()
	assert.Equal(t, ExitInterrupted, InterruptedCode(ctx), "InterruptedCode after stop")
}

func TestCommandLine(t *testing.T) {
	got := CommandLine("go run ./tools/cmd/record", []string{"-name", "x", "-bench", "^BenchmarkGap$"})
	assert.Equal(t, "go run ./tools/cmd/record -name x -bench '^BenchmarkGap$'", got, "CommandLine")
}

func TestWithoutFlag(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		flag       string
		takesValue bool
		want       []string
	}{
		{"value apart", []string{"-out", "/tmp/r", "-name", "x"}, "out", true, []string{"-name", "x"}},
		{"value joined", []string{"-name", "x", "-out=/tmp/r"}, "out", true, []string{"-name", "x"}},
		{"two dashes", []string{"--out", "/tmp/r", "-name", "x", "--out=/tmp/s"}, "out", true, []string{"-name", "x"}},
		{"absent", []string{"-name", "x", "-outer", "y"}, "out", true, []string{"-name", "x", "-outer", "y"}},
		{"boolean keeps the next argument", []string{"-allow-dirty", "-stage", "s"}, "allow-dirty", false, []string{"-stage", "s"}},
		{"boolean with a value", []string{"-allow-dirty=true", "-stage", "s"}, "allow-dirty", false, []string{"-stage", "s"}},
		{"after --", []string{"-out", "a", "--", "-out", "b"}, "out", true, []string{"--", "-out", "b"}},
		{"value missing", []string{"-name", "x", "-out"}, "out", true, []string{"-name", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithoutFlag(tt.args, tt.flag, tt.takesValue)
			assert.Equal(t, tt.want, got, "WithoutFlag(%q, %q, %v)", tt.args, tt.flag, tt.takesValue)
		})
	}
}

func TestOneLine(t *testing.T) {
	assert.Equal(t, "a b c", oneLine("a\n  b\tc\n"), "oneLine")
	if got := strings.Count(oneLine("x\ny"), "\n"); got != 0 {
		t.Errorf("oneLine kept %d newlines", got)
	}
}

// TestClearDirMarkerLast checks ClearDir removes the marker after
// everything else, so that a clear stopped part-way leaves a directory
// still known as the command's own.
func TestClearDirMarkerLast(t *testing.T) {
	dir := t.TempDir()
	const marker = ".mine"
	for _, name := range []string{marker, "a.html", "z.html"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var removed []string
	removeAll = func(p string) error { removed = append(removed, filepath.Base(p)); return os.RemoveAll(p) }
	defer func() { removeAll = os.RemoveAll }()
	if cleared, err := ClearDir(dir, marker); !cleared || err != nil {
		t.Fatalf("ClearDir = %v, %v; want true, nil", cleared, err)
	}
	if len(removed) == 0 || removed[len(removed)-1] != marker {
		t.Errorf("ClearDir removed %q; want the marker last", removed)
	}
}
