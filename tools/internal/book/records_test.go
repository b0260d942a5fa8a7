package book

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/records"
)

func loadFixtureRecord(t *testing.T, name string) *records.Record {
	t.Helper()
	rec, err := records.Load(filepath.Join(fixtureRoot, "book", "records", name+".json"))
	require.NoError(t, err)
	return rec
}

// cell is how a table cell starts: the formatted number, then the spread
// or the end of the cell.
func cell(v float64, unit string) string {
	return ">" + tableCell(v, unit)
}

// TestTableMatchesRecord formats each value straight from the record file
// and looks for it in the rendered table, row by row.
func TestTableMatchesRecord(t *testing.T) {
	b := newTestBuilder(t)
	rec := loadFixtureRecord(t, "test")
	ref := loadFixtureRecord(t, "reference")
	tests := []struct {
		name    string
		src     string
		stages  []string
		benches []string
		units   []string
		stats   []string
		ref     bool
		headers []string
	}{
		{
			name:    "one stage, two units",
			src:     "{{#table record=test stage=stage0-mailbox bench=RoundTrip/.* unit=ns/op,cores}}",
			stages:  []string{"stage0-mailbox"},
			benches: []string{"RoundTrip/engine=copy", "RoundTrip/engine=compute"},
			units:   []string{"ns/op", "cores"},
			stats:   []string{"median"},
			headers: []string{">time/op · median</th>", ">cores · median</th>"},
		},
		{
			name:    "best and median",
			src:     "{{#table record=test stage=stage1-ring bench=FillStream/size=64B/depth=(1|64) unit=ns/op stat=both}}",
			stages:  []string{"stage1-ring"},
			benches: []string{"FillStream/size=64B/depth=1", "FillStream/size=64B/depth=64"},
			units:   []string{"ns/op"},
			stats:   []string{"best", "median"},
			headers: []string{">time/op · best</th>", ">time/op · median</th>", "Best and median of 3 passes"},
		},
		{
			name:    "stage against stage, with the reference VM",
			src:     "{{#table record=test stage=stage0-mailbox,stage1-ring bench=RoundTrip/engine=copy unit=ns/op ref=reference}}",
			stages:  []string{"stage0-mailbox", "stage1-ring"},
			benches: []string{"RoundTrip/engine=copy"},
			units:   []string{"ns/op"},
			stats:   []string{"median"},
			ref:     true,
			headers: []string{`<th colspan="2">stage0-mailbox</th><th colspan="2">stage1-ring</th>`, ">time/op · median · this machine</th>", ">time/op · median · reference VM</th>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, html := expandOK(t, b, tt.src)
			for _, h := range tt.headers {
				if !strings.Contains(html, h) {
					t.Errorf("no header %q in:\n%s", h, html)
				}
			}
			for _, bench := range tt.benches {
				// The row of bench: from its name to the end of the row.
				start := strings.Index(html, "<code>"+bench+"</code>")
				if start < 0 {
					t.Fatalf("no row for %s in:\n%s", bench, html)
				}
				row := html[start : start+strings.Index(html[start:], "</tr>")]
				for _, st := range tt.stages {
					r, ok := rec.Find(st, bench)
					if !ok {
						t.Fatalf("fixture has no %s %s", st, bench)
					}
					for _, unit := range tt.units {
						m, _ := r.Metric(unit)
						for _, stat := range tt.stats {
							v := m.Best
							if stat == "median" {
								v = m.Median
							}
							if !strings.Contains(row, cell(v, unit)) {
								t.Errorf("%s row lacks %s %s %s = %s:\n%s", bench, st, unit, stat, FormatValue(v, unit), row)
							}
						}
					}
					if tt.ref {
						rr, _ := ref.Find(st, bench)
						m, _ := rr.Metric("ns/op")
						if !strings.Contains(row, cell(m.Median, "ns/op")) {
							t.Errorf("%s row lacks reference %s = %s:\n%s", bench, st, FormatValue(m.Median, "ns/op"), row)
						}
					}
				}
			}
			if !strings.Contains(html, `Source: record <a href="records/test.json">test.json</a> (this machine, 2026-11-30, commit 0123456789ab+dirty)`) {
				t.Errorf("no source line in:\n%s", html)
			}
		})
	}
}

// TestBandwidthUnits checks that a reference stored in MB/s lines up with a
// record stored in B/s.
func TestBandwidthUnits(t *testing.T) {
	b := newTestBuilder(t)
	_, html := expandOK(t, b, "{{#table record=test stage=stage1-ring bench=H2D/.* unit=B/s ref=reference stat=best}}")
	for _, want := range []string{cell(9.6e9, "B/s"), cell(65600, "MB/s"), "9.60 GB/s", "65.6 GB/s", "reference: record"} {
		if !strings.Contains(html, want) {
			t.Errorf("table lacks %q:\n%s", want, html)
		}
	}
}

func TestInlineDirectives(t *testing.T) {
	b := newTestBuilder(t)
	tests := []struct {
		name string
		src  string
		want string // the rendered paragraph contains this
	}{
		{"value: the median by default", "took {{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op}} per trip", ">1.78 µs</span> per trip"},
		{"value best", "{{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op stat=best}}", ">1.71 µs</span>"},
		{"value says its statistic and spread", "{{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op}}",
			`title="test.json: stage0-mailbox RoundTrip/engine=copy, ns/op, median of 3 passes; min 1.71 µs, max 1.87 µs; (max − min)/median 8.7% (this machine); made from a modified tree"`},
		{"a dirty record's figure is flagged", "{{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op}}", `<span class="figure dirty"`},
		{"a clean record's is not", "{{#value record=placed stage=stage7-idle bench=Quiet unit=cores}}", `<span class="figure" title="placed.json: stage7-idle Quiet, cores, median of 5 passes; min 0.04 cores, max 0.30 cores`},
		{"value of one pass", "{{#value record=test stage=stage0-mailbox bench=RoundTrip/engine=copy unit=ns/op stat=pass3}}", ">1.87 µs</span>"},
		// placed's stage 7 Quiet: 0.04 to 0.30 cores over five passes
		{"the lowest pass, whichever it was", "{{#value record=placed stage=stage7-idle bench=Quiet unit=cores stat=lowest}}",
			`title="placed.json: stage7-idle Quiet, cores, the lowest of 5 passes (this machine)">0.04 cores</span>`},
		{"the highest pass", "{{#value record=placed stage=stage7-idle bench=Quiet unit=cores stat=highest}}", ">0.30 cores</span>"},
		{"a transcription's value says where it was copied from", "{{#value record=reference stage=stage1-ring bench=H2D/mem=pinned/size=1MiB unit=B/s}}",
			`title="reference.json: stage1-ring H2D/mem=pinned/size=1MiB, B/s, transcribed from seed 004 (reference VM)"`},
		{"value from the limits", "{{#value record=test stage=limits bench=Baseline/pingpong unit=ns/op stat=best}}", ">115 ns</span>"},
		{"ratio", "{{#ratio record=test a=stage1-ring:FillStream/size=64B/depth=1 b=stage1-ring:FillStream/size=64B/depth=64 unit=ns/op stat=best}}", ">35×</span>"},
		{"ratio across records", "{{#ratio record=reference a=stage1-ring:H2D/mem=pinned/size=1MiB record_b=test b=stage1-ring:H2D/mem=pinned/size=1MiB unit=B/s stat=best}}", ">6.8×</span>"},
		// Rows with a canary per pass: only passes in one placement count.
		{"ratio of rows measured in one placement", "{{#ratio record=placed a=stage7-idle:Quiet b=stage4-nolock:Quiet unit=cores}}",
			"over the 4 of 5 passes in which both rows&#39; canaries agreed within 30% (one machine placement)\">0.025×</span>"},
		{"meta machine", "{{#meta record=test field=machine}}", ">this machine (AMD EPYC 7B13, 2 cores, linux/amd64 6.18.0, go1.26.8)</span>"},
		{"meta command", "{{#meta record=test field=command}}", "<code class=\"command\">go run ./tools/cmd/record -stages stage0-mailbox,stage1-ring -passes 3</code>"},
		{"meta in a table cell", "| a | b |\n|---|---|\n| x | {{#meta record=test field=rejected}} |", "<td><span class=\"meta\" title=\"test.json: rejected\">1</span></td>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md, _ := expandOK(t, b, tt.src)
			html, _, err := b.md.render([]byte(md), linkMode{chapterPath: "test.md", pagePath: "test.html"})
			require.NoError(t, err)
			if !strings.Contains(string(html), tt.want) {
				t.Errorf("%s rendered to\n%s\nwant it to contain %q", tt.src, html, tt.want)
			}
		})
	}
}

func TestAcceptedPasses(t *testing.T) {
	tests := []struct {
		name string
		rec  records.Record
		want int
	}{
		{"all accepted", records.Record{Settings: records.Settings{Passes: 2}, Canary: []records.Canary{{Pass: 1}, {Pass: 2}}}, 2},
		// A gate that gave up keeps fewer passes than were wanted; the
		// book must say how many figures stand behind a row, not how many
		// were asked for.
		{"gate gave up", records.Record{Settings: records.Settings{Passes: 3}, Canary: []records.Canary{{Pass: 1, Rejected: true}, {Pass: 2}, {Pass: 3, Rejected: true}}}, 1},
		{"no canary", records.Record{Settings: records.Settings{Passes: 3}}, 3},
		{"nothing said", records.Record{}, 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, acceptedPasses(&tt.rec), "acceptedPasses(%s)", tt.name)
	}
}
