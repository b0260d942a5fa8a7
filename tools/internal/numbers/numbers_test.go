package numbers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
)

// testRecords is one record of two rows, as record writes them.
func testRecords() map[string]*records.Record {
	return map[string]*records.Record{"stages": {
		Schema:   records.SchemaVersion,
		Name:     "stages",
		Date:     "2026-12-06T16:00:00Z",
		Commit:   "6560f82b8a33aaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		Command:  "go run ./tools/cmd/record -name stages",
		Machine:  records.Machine{Label: "this machine", CPU: "AMD EPYC", Cores: 2, OS: "Linux", Kernel: "6.18.44", Go: "go1.26.8"},
		Settings: records.Settings{Passes: 5},
		Limits: []records.Row{{Stage: "stage0-mailbox", Benchmark: "Baseline/pingpong", Metrics: []records.Metric{
			records.NewMetric("ns/op", []float64{134.2, 112.2, 123.3, 130.5, 118.5}),
		}}},
		Rows: []records.Row{{Stage: "stage0-mailbox", Benchmark: "RoundTrip/engine=copy", Metrics: []records.Metric{
			records.NewMetric("ns/op", []float64{211.9, 559.1, 198.2, 1090, 184.4}),
			records.NewMetric("cores", []float64{1.982, 1.98, 1.993, 1.992, 1.998}),
		}}},
	}}
}

const readme = "# stage0\n\nProse before.\n\n## Numbers\n\n" +
	"<!-- numbers: the table below is written by go run ./tools/cmd/numbers\n" +
	"# a comment line\n" +
	"`Baseline/pingpong` | stages | stage0-mailbox | Baseline/pingpong | ns/op\n" +
	"`RoundTrip/engine=copy` | stages | stage0-mailbox | RoundTrip/engine=copy | ns/op, cores\n" +
	"-->\n" +
	"| row | median | passes (min–max) |\n|---|---|---|\n| `Baseline/pingpong` | 207 ns | 133–263 ns |\n" +
	"<!-- end numbers -->\n\nProse after, untouched.\n"

func TestUpdateWritesTheRecordsFigures(t *testing.T) {
	got, err := Update(readme, testRecords())
	require.NoError(t, err)
	// The medians and the lowest and highest pass, formatted as the book
	// formats them; the old, hand-typed figures are gone.
	assert.Contains(t, got, "| `Baseline/pingpong` | 123 ns | 112–134 ns |")
	assert.Contains(t, got, "| `RoundTrip/engine=copy` | 212 ns; 1.99 cores | 184 ns – 1.09 µs; 1.98–2.00 cores |")
	assert.NotContains(t, got, "207 ns")
	// The sentence says which record, commit, machine and passes.
	para := strings.Join(strings.Fields(got), " ")
	assert.Contains(t, para, "From the record `stages` (`book/records/`), taken at commit `6560f82` on a 2-core AMD EPYC machine (Linux 6.18.44, go1.26.8)")
	assert.Contains(t, para, "each figure is the median of 5 passes, beside the lowest and highest pass.")
	// What is outside the block, and the spec itself, are left alone.
	assert.True(t, strings.HasPrefix(got, "# stage0\n\nProse before.\n\n## Numbers\n\n<!-- numbers:"))
	assert.True(t, strings.HasSuffix(got, "<!-- end numbers -->\n\nProse after, untouched.\n"))
	assert.Contains(t, got, "# a comment line\n`Baseline/pingpong` | stages")

	again, err := Update(got, testRecords())
	require.NoError(t, err)
	assert.Equal(t, got, again, "a second run must change nothing")
}

func TestUpdateNamesTheSettingsAndEveryCommit(t *testing.T) {
	recs := testRecords()
	polled := *recs["stages"]
	polled.Name = "stages-polled"
	polled.Commit = "84ca0dd0000000000000000000000000000000000"
	polled.Settings.Env = []string{"SOFTGPU_POLL_BUDGET=150000"}
	recs["stages-polled"] = &polled
	text := "<!-- numbers\n" +
		"a | stages | stage0-mailbox | Baseline/pingpong | ns/op\n" +
		"b | stages-polled | stage0-mailbox | Baseline/pingpong | ns/op\n-->\n<!-- end numbers -->\n"
	got, err := Update(text, recs)
	require.NoError(t, err)
	para := strings.Join(strings.Fields(got), " ")
	assert.Contains(t, para, "From the records `stages` and `stages-polled`")
	assert.Contains(t, para, "`stages` taken at commit `6560f82`")
	assert.Contains(t, para, "`stages-polled` taken at commit `84ca0dd`")
	assert.Contains(t, para, "(`stages-polled` with `SOFTGPU_POLL_BUDGET=150000`)")
}

func TestSpecErrorsNameTheirLine(t *testing.T) {
	transcribed := testRecords()
	transcribed["reference"] = &records.Record{Name: "reference", Transcribed: true, Source: "seed 004",
		Rows: []records.Row{{Stage: "stage0-mailbox", Benchmark: "X", Metrics: []records.Metric{records.NewMetric("ns/op", []float64{1})}}}}
	for _, tc := range []struct {
		name, text, want string
	}{
		{"spec never closed", "<!-- numbers\na | stages | stage0-mailbox | Baseline/pingpong | ns/op\n", "line 1: the numbers spec is never closed"},
		{"block never closed", "<!-- numbers\na | stages | stage0-mailbox | Baseline/pingpong | ns/op\n-->\n| x |\n", "line 1: the numbers block is never closed"},
		{"no rows", "<!-- numbers\n-->\n<!-- end numbers -->\n", "line 1: the numbers spec names no row"},
		{"four fields", "\n<!-- numbers\na | stages | Baseline/pingpong | ns/op\n-->\n<!-- end numbers -->\n", "line 3: want label | record | stage | benchmark | units, got 4"},
		{"empty field", "<!-- numbers\na | | stage0-mailbox | Baseline/pingpong | ns/op\n-->\n<!-- end numbers -->\n", "line 2: field 2 is empty"},
		{"no such record", "<!-- numbers\na | nope | stage0-mailbox | Baseline/pingpong | ns/op\n-->\n<!-- end numbers -->\n", `line 2: no record "nope"`},
		{"no such row", "<!-- numbers\na | stages | stage1-ring | Baseline/pingpong | ns/op\n-->\n<!-- end numbers -->\n", `line 2: record "stages" has no row stage1-ring Baseline/pingpong`},
		{"no such unit", "<!-- numbers\na | stages | stage0-mailbox | RoundTrip/engine=copy | B/s\n-->\n<!-- end numbers -->\n", `has no metric "B/s" (it has ns/op, cores)`},
		{"a transcription", "<!-- numbers\na | reference | stage0-mailbox | X | ns/op\n-->\n<!-- end numbers -->\n", `record "reference" is a transcription`},
		{"nested", "<!-- numbers\na | stages | stage0-mailbox | Baseline/pingpong | ns/op\n-->\n<!-- numbers\n", "line 4: a numbers block opens inside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Update(tc.text, transcribed)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFormatRange(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		unit   string
		want   string
	}{
		{112.2, 134.2, "ns/op", "112–134 ns"},
		{419, 1090, "ns/op", "419 ns – 1.09 µs"},
		{1.004, 1.07, "ratio", "1.00×–1.07×"},
		{1.97, 2.0, "cores", "1.97–2.00 cores"},
		{28.7e9, 32.3e9, "B/s", "28.7–32.3 GB/s"},
		{5, 5, "ns/op", "5.00 ns"},
	} {
		assert.Equal(t, tc.want, formatRange(tc.lo, tc.hi, tc.unit), "%v–%v %s", tc.lo, tc.hi, tc.unit)
	}
}

// TestSyncRefusesATypedTable: a stage README with a Numbers section but
// no block is an error, and a stale block is reported and, with write,
// rewritten.
func TestSync(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "book", "records"), 0o755))
	require.NoError(t, records.Save(filepath.Join(root, "book", "records", "stages.json"), testRecords()["stages"]))
	for _, d := range []string{"stage0-mailbox", "stage1-ring"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	write := func(rel, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644))
	}
	write("README.md", "# softgpu\n")
	write("stage0-mailbox/README.md", readme)
	write("stage1-ring/README.md", "## Numbers\n\n| row | median |\n|---|---|\n| `Fill` | 864 ns |\n")

	_, err := Sync(root, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join("stage1-ring", "README.md")+": its Numbers section has no numbers block")

	write("stage1-ring/README.md", "# stage1-ring\n\nNo figures here.\n")
	stale, err := Sync(root, false)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join("stage0-mailbox", "README.md")}, stale)
	data, _ := os.ReadFile(filepath.Join(root, "stage0-mailbox", "README.md"))
	assert.Equal(t, readme, string(data), "-check must change nothing")

	stale, err = Sync(root, true)
	require.NoError(t, err)
	assert.Len(t, stale, 1)
	stale, err = Sync(root, false)
	require.NoError(t, err)
	assert.Empty(t, stale, "after writing, nothing is stale")
}

// TestEveryREADMEQuotesTheRecords: the repository's own READMEs quote the
// records in book/records as they are. It fails after a re-take until
// go run ./tools/cmd/numbers has rewritten the tables.
func TestEveryREADMEQuotesTheRecords(t *testing.T) {
	root, err := stages.Root()
	require.NoError(t, err)
	stale, err := Sync(root, false)
	require.NoError(t, err)
	assert.Empty(t, stale, "READMEs whose tables are not the records' (run: go run ./tools/cmd/numbers)")
	for _, s := range stages.Existing(root) {
		data, err := os.ReadFile(filepath.Join(root, s.Dir, "README.md"))
		require.NoError(t, err)
		blocks, err := Parse(string(data))
		require.NoError(t, err)
		assert.NotEmpty(t, blocks, "%s/README.md quotes no figure from the records", s.Dir)
	}
}

func TestWrapKeepsCodeSpansWhole(t *testing.T) {
	got := wrapParagraph("taken on a machine with `go run ./tools/cmd/record`; each figure is the median", 30)
	assert.Equal(t, "taken on a machine with\n`go run ./tools/cmd/record`;\neach figure is the median", got)
	for _, line := range strings.Split(got, "\n") {
		assert.Equal(t, 0, strings.Count(line, "`")%2, "a line ends inside a code span: %q", line)
	}
}

func TestKindOfNamesWhatAFigureIs(t *testing.T) {
	for u, want := range map[string]string{
		"ns/op": "", "B/s": "", "cores": "", "allocs/op": "", "irqs/op": "", "ratio": "",
		"p99-ns": " (p99)", "roundtrip-ns": " (roundtrip)", "floor-ratio": " (floor)", "onpath-share": " (onpath)",
	} {
		assert.Equal(t, want, kindOf(u), "kindOf(%q)", u)
	}
}
