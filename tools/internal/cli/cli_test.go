package cli

import (
	"reflect"
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
