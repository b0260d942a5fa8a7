package cli

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommandParse(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantRest   []string
		wantN      int
		wantPaths  []string
		wantCode   int
		wantDone   bool
		wantStdout string
		wantStderr string // the whole of stderr
	}{
		{name: "flags first", args: []string{"-n", "3", "a", "b"}, wantRest: []string{"a", "b"}, wantN: 3},
		{name: "flags last", args: []string{"a", "b", "-n", "3"}, wantRest: []string{"a", "b"}, wantN: 3},
		{name: "flags between", args: []string{"a", "-n=3", "b"}, wantRest: []string{"a", "b"}, wantN: 3},
		{name: "repeated flag", args: []string{"a", "-path", "x", "b", "-path", "y/z"}, wantRest: []string{"a", "b"}, wantPaths: []string{"x", "y/z"}},
		{name: "double dash ends flags", args: []string{"a", "--", "-n", "b"}, wantRest: []string{"a", "-n", "b"}},
		{name: "no arguments", args: nil},
		{name: "help", args: []string{"a", "-h"}, wantDone: true, wantCode: ExitOK, wantStdout: "usage: t [-n N] ARG...\n\nflags:\n  -n int"},
		{name: "long help", args: []string{"-help"}, wantDone: true, wantCode: ExitOK, wantStdout: "usage: t"},
		{name: "unknown flag", args: []string{"a", "-nosuch"}, wantDone: true, wantCode: ExitUsage, wantStderr: "t: flag provided but not defined: -nosuch\n"},
		{name: "bad value", args: []string{"-n", "three"}, wantDone: true, wantCode: ExitUsage, wantStderr: "t: invalid value \"three\" for flag -n: parse error\n"},
		{name: "missing value", args: []string{"a", "-n"}, wantDone: true, wantCode: ExitUsage, wantStderr: "t: flag needs an argument: -n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			c := NewCommand("t", "usage: t [-n N] ARG...\n", &stdout, &stderr)
			n := c.Flags.Int("n", 0, "a number")
			var paths pathList
			c.Flags.Var(&paths, "path", "a path (repeatable)")
			rest, code, done := c.Parse(tt.args)
			if done != tt.wantDone || code != tt.wantCode {
				t.Fatalf("Parse(%q) = done %v, code %d; want %v, %d (stderr %q)", tt.args, done, code, tt.wantDone, tt.wantCode, stderr.String())
			}
			if !done && (!reflect.DeepEqual(rest, tt.wantRest) || *n != tt.wantN || !reflect.DeepEqual([]string(paths), tt.wantPaths)) {
				t.Errorf("Parse(%q) = %q, -n %d, -path %q; want %q, %d, %q", tt.args, rest, *n, paths, tt.wantRest, tt.wantN, tt.wantPaths)
			}
			if !strings.HasPrefix(stdout.String(), tt.wantStdout) || (tt.wantStdout == "" && stdout.Len() > 0) {
				t.Errorf("Parse(%q) stdout = %q; want it to start %q", tt.args, stdout.String(), tt.wantStdout)
			}
			assert.Equal(t, tt.wantStderr, stderr.String(), "Parse(%q) stderr", tt.args)
		})
	}
}

type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(s string) error { *p = append(*p, s); return nil }

func TestMisuseAndFail(t *testing.T) {
	var stdout, stderr strings.Builder
	c := NewCommand("stages diff", "usage: stages diff\n", &stdout, &stderr)
	assert.Equal(t, ExitUsage, c.Misuse("unknown stage %q;\nstages are: a, b", "nosuch"), "Misuse")
	if want := "stages diff: unknown stage \"nosuch\"; stages are: a, b\n"; stderr.String() != want {
		t.Errorf("Misuse wrote %q; want one line %q", stderr.String(), want)
	}
	stderr.Reset()
	if code := c.Fail(errString("git failed")); code != ExitFailed || stderr.String() != "stages diff: git failed\n" {
		t.Errorf("Fail = %d, %q; want %d, %q", code, stderr.String(), ExitFailed, "stages diff: git failed\n")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestPrintUsageWithoutFlags(t *testing.T) {
	var out strings.Builder
	NewCommand("stages list", "usage: stages list\n\nPrints the stages.\n", &out, &out).PrintUsage(&out)
	if got, want := out.String(), "usage: stages list\n\nPrints the stages.\n"; got != want {
		t.Errorf("PrintUsage = %q; want %q (no empty flags section)", got, want)
	}
}
