package benchfmt

import (
	"os"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitName(t *testing.T) {
	tests := []struct {
		name      string
		full      string
		wantName  string
		wantProcs int
	}{
		{"procs suffix", "BenchmarkBaseline/pingpong-2", "Baseline/pingpong", 2},
		{"no suffix", "BenchmarkQuiet", "Quiet", 1},
		{"keys and suffix", "BenchmarkFillStream/size=64B/depth=16-12", "FillStream/size=64B/depth=16", 12},
		{"dash in key, no suffix", "BenchmarkGap/mode=hy-brid", "Gap/mode=hy-brid", 1},
		{"no prefix", "Fill/size=64B-4", "Fill/size=64B", 4},
		{"zero is not procs", "BenchmarkX/n-0", "X/n-0", 1},
		{"signed is not procs", "BenchmarkX/n-+2", "X/n-+2", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, procs := SplitName(tt.full)
			if name != tt.wantName || procs != tt.wantProcs {
				t.Errorf("SplitName(%q) = %q, %d; want %q, %d", tt.full, name, procs, tt.wantName, tt.wantProcs)
			}
		})
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		text string
		want Line
	}{
		{
			name: "config",
			text: "pkg: softgpu/stage0-mailbox",
			want: Line{Kind: Config, Text: "pkg: softgpu/stage0-mailbox", Key: "pkg", Val: "softgpu/stage0-mailbox"},
		},
		{
			name: "custom metrics",
			text: "BenchmarkRoundTrip/engine=copy-2 \t 500 \t 2210 ns/op \t 2.004 cores \t 9800 p99-ns",
			want: Line{Kind: Result, Bench: &Bench{Name: "RoundTrip/engine=copy", Procs: 2, Iters: 500,
				Values: []Value{{2210, "ns/op"}, {2.004, "cores"}, {9800, "p99-ns"}}}},
		},
		{
			name: "bandwidth",
			text: "BenchmarkH2D/mem=pinned/size=1MiB-2\t100\t40321 ns/op\t26005.12 MB/s",
			want: Line{Kind: Result, Bench: &Bench{Name: "H2D/mem=pinned/size=1MiB", Procs: 2, Iters: 100,
				Values: []Value{{40321, "ns/op"}, {26005.12, "MB/s"}}}},
		},
		{name: "PASS", text: "PASS", want: Line{Kind: Other, Text: "PASS"}},
		{name: "ok line", text: "ok  \tsoftgpu/stage0-mailbox\t3.2s", want: Line{Kind: Other, Text: "ok  \tsoftgpu/stage0-mailbox\t3.2s"}},
		{name: "log output", text: "    bench_test.go:88: engines parked", want: Line{Kind: Other, Text: "    bench_test.go:88: engines parked"}},
		{name: "upper-case key", text: "Note: x", want: Line{Kind: Other, Text: "Note: x"}},
		{name: "name alone (chatty)", text: "BenchmarkQuiet", want: Line{Kind: Other, Text: "BenchmarkQuiet"}},
		{name: "failure", text: "BenchmarkQuiet-2 \t--- FAIL: BenchmarkQuiet-2", want: Line{Kind: Other, Text: "BenchmarkQuiet-2 \t--- FAIL: BenchmarkQuiet-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLine(tt.text)
			require.NoError(t, err, "ParseLine(%q) error", tt.text)
			if tt.want.Kind == Result {
				tt.want.Text = tt.text
			}
			assert.Equal(t, tt.want, got, "ParseLine(%q) = %+v (bench %+v); want %+v (bench %+v)", tt.text, got, got.Bench, tt.want, tt.want.Bench)
		})
	}
}

func TestParseLineErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"odd fields", "BenchmarkX-2 10 100 ns/op 3"},
		{"stdout mid-line", "BenchmarkX-2 10 hello ns/op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := ParseLine(tt.text); err == nil {
				t.Errorf("ParseLine(%q) = %+v, nil; want an error", tt.text, got)
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	out := parseFile(t, "testdata/ring.txt")
	if pkg, _ := out.Config("pkg"); pkg != "softgpu/stage1-ring" {
		t.Errorf("Config(pkg) = %q; want softgpu/stage1-ring", pkg)
	}
	wantNames := []string{
		"Baseline/pingpong",
		"Baseline/memmove/size=1MiB",
		"RoundTrip/engine=copy",
		"FillStream/size=64B/depth=16",
		"Quiet",
	}
	assert.Equal(t, wantNames, out.Names(), "Names()")
	assert.Equal(t, 6, len(out.Results()), "len(Results()); want 6 (RoundTrip counted twice)")
	results := out.Results()
	if v, ok := results[1].Value("MB/s"); !ok || v != 26005.12 {
		t.Errorf("memmove MB/s = %v, %v; want 26005.12, true", v, ok)
	}
	if v, ok := results[3].Value("doorbells/op"); !ok || v != 0.0625 {
		t.Errorf("FillStream doorbells/op = %v, %v; want 0.0625, true", v, ok)
	}
	if results[5].Procs != 1 || results[5].Family() != "Quiet" {
		t.Errorf("Quiet = procs %d family %q; want 1, Quiet", results[5].Procs, results[5].Family())
	}
}

func TestTidy(t *testing.T) {
	tests := []struct {
		name string
		in   Value
		want Value
	}{
		{"MB/s to B/s", Value{26005.12, "MB/s"}, Value{26005.12e6, "B/s"}},
		{"ns/op kept", Value{118.4, "ns/op"}, Value{118.4, "ns/op"}},
		{"custom kept", Value{9800, "p99-ns"}, Value{9800, "p99-ns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Tidy(tt.in), "Tidy(%v)", tt.in)
		})
	}
}

func parseFile(t *testing.T, path string) *Output {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out, err := Parse(f)
	require.NoError(t, err, "Parse(%s)", path)
	return out
}

func TestLineWithout(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		units     []string
		wantText  string
		wantTaken []Value
	}{
		{
			name:      "canary taken out",
			text:      "BenchmarkGap/gap=30us-2   \t    5000\t     41230 ns/op\t        60.5 canary-before-ns\t   0.98 cores\t        330.0 canary-after-ns",
			units:     []string{"canary-before-ns", "canary-after-ns"},
			wantText:  "BenchmarkGap/gap=30us-2\t5000\t41230 ns/op\t0.98 cores",
			wantTaken: []Value{{60.5, "canary-before-ns"}, {330, "canary-after-ns"}},
		},
		{
			name:     "nothing to take",
			text:     "BenchmarkFill/size=64B-2 \t 1000\t 812.0 ns/op",
			units:    []string{"canary-before-ns"},
			wantText: "BenchmarkFill/size=64B-2 \t 1000\t 812.0 ns/op",
		},
		{
			name:     "not a result",
			text:     "goos: linux",
			units:    []string{"canary-before-ns"},
			wantText: "goos: linux",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLine(tt.text)
			require.NoError(t, err)
			got, taken := l.Without(tt.units...)
			if got.Text != tt.wantText || !reflect.DeepEqual(taken, tt.wantTaken) {
				t.Errorf("Without(%q) = %q, %v; want %q, %v", tt.text, got.Text, taken, tt.wantText, tt.wantTaken)
			}
			again, err := ParseLine(got.Text)
			require.NoError(t, err)
			if got.Kind == Result && !reflect.DeepEqual(again.Bench, got.Bench) {
				t.Errorf("Without(%q).Bench = %+v; but its text parses as %+v", tt.text, got.Bench, again.Bench)
			}
			if l.Kind == Result && len(tt.wantTaken) > 0 && len(l.Bench.Values) == len(got.Bench.Values) {
				t.Errorf("Without changed its receiver's values")
			}
		})
	}
}
