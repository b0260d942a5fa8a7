package benchfmt

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	perf "golang.org/x/perf/benchfmt"
)

func TestWriteStage(t *testing.T) {
	tests := []struct {
		name  string
		input string
		stage string
		want  string
	}{
		{
			name:  "pkg rewritten, junk dropped",
			input: "goos: linux\npkg: softgpu/stage1-ring\nBenchmarkX-2 10 5 ns/op\n--- BENCH: BenchmarkX-2\n    x_test.go:1: hi\nPASS\n",
			stage: "stage1-ring",
			want:  "goos: linux\nstage: stage1-ring\nBenchmarkX-2 10 5 ns/op\n",
		},
		{
			name:  "no pkg line gets one",
			input: "BenchmarkX 10 5 ns/op\n",
			stage: "stage0-mailbox",
			want:  "stage: stage0-mailbox\nBenchmarkX 10 5 ns/op\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ParseString(tt.input)
			require.NoError(t, err)
			var b strings.Builder
			require.NoError(t, WriteStage(&b, out, tt.stage))
			assert.Equal(t, tt.want, b.String(), "WriteStage(%q, %s)", tt.input, tt.stage)
		})
	}
}

// TestWriteStageBenchstat reads what WriteStage wrote with benchstat's own
// parser: every result must carry the stage label and no pkg, and the values
// must be the ones Parse saw.
func TestWriteStageBenchstat(t *testing.T) {
	out := parseFile(t, "testdata/ring.txt")
	var buf bytes.Buffer
	for _, stage := range []string{"stage0-mailbox", "stage1-ring"} {
		require.NoError(t, WriteStage(&buf, out, stage))
	}
	reader := perf.NewReader(&buf, "ring.txt")
	var stages []string
	n := 0
	for reader.Scan() {
		res, ok := reader.Result().(*perf.Result)
		if !ok {
			t.Fatalf("benchstat's reader: %v", reader.Result())
		}
		if pkg := res.GetConfig("pkg"); pkg != "" {
			t.Errorf("result %s has pkg %q; want none", res.Name, pkg)
		}
		stage := res.GetConfig("stage")
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
		want := out.Results()[n%len(out.Results())]
		name, _ := SplitName(string(res.Name))
		if name != want.Name || res.Values[0].OrigValue != want.Values[0].Value {
			t.Errorf("result %d = %s %v; want %s %v", n, name, res.Values[0].OrigValue, want.Name, want.Values[0].Value)
		}
		n++
	}
	require.NoError(t, reader.Err())
	if want := []string{"stage0-mailbox", "stage1-ring"}; strings.Join(stages, ",") != strings.Join(want, ",") {
		t.Errorf("stages seen by benchstat = %q; want %q", stages, want)
	}
	assert.Equal(t, 2*len(out.Results()), n, "benchstat read %d results", n)
}
