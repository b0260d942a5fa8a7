package cli

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
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

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantDone bool
	}{
		{"flags parse", []string{"-n", "3"}, ExitOK, false},
		{"help", []string{"-h"}, ExitOK, true},
		{"unknown flag", []string{"-nosuch"}, ExitUsage, true},
		{"bad value", []string{"-n", "three"}, ExitUsage, true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 0, "a number")
		code, done := ParseFlags(fs, tt.args)
		if code != tt.wantCode || done != tt.wantDone {
			t.Errorf("ParseFlags(%s: %q) = %d, %v; want %d, %v", tt.name, tt.args, code, done, tt.wantCode, tt.wantDone)
		}
	}
}

func TestMisuse(t *testing.T) {
	var out strings.Builder
	code := Misuse(&out, "record")("-passes %d: want at least 1", 0)
	want := "record: -passes 0: want at least 1\nrun with -h for usage\n"
	if code != ExitUsage || out.String() != want {
		t.Errorf("Misuse = %d, %q; want %d, %q", code, out.String(), ExitUsage, want)
	}
}
