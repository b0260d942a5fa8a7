package book

import (
	"fmt"
	"strconv"
	"strings"

	"softgpu/tools/internal/records"
)

// This file implements {{#table}}: benchmarks of a record as an HTML table,
// one row per benchmark, one column per stage × unit × stat × machine.

// tableColumn is one value column of a {{#table}}.
type tableColumn struct {
	header string
	rec    *records.Record
	stage  string
	unit   string
	stat   string
}

// tableHTML renders {{#table record= stage= bench= unit= [ref=] [stat=] [caption=]}}.
func (b *builder) tableHTML(d directive, prefix string) (string, error) {
	if err := d.allow("record", "stage", "bench", "unit", "ref", "stat", "caption"); err != nil {
		return "", err
	}
	sel, err := b.selectRows(d)
	if err != nil {
		return "", err
	}
	rec, ref, stageList := sel.rec, sel.ref, sel.stages
	unitArg, err := d.require("unit")
	if err != nil {
		return "", err
	}
	stat, err := parseStat(d, true)
	if err != nil {
		return "", err
	}
	units := splitList(unitArg)
	if len(units) == 0 {
		return "", d.errorf("empty unit=")
	}

	// Rows: benchmark names in record order, first stage first.
	var names []string
	seen := map[string]bool{}
	all := sel.all()
	for _, r := range all {
		if !seen[r.Benchmark] {
			seen[r.Benchmark] = true
			names = append(names, r.Benchmark)
		}
	}
	for _, u := range units {
		if err := checkUnit(all, u); err != nil {
			return "", d.errorf("%v", err)
		}
	}

	stats := []string{stat}
	if stat == "both" {
		stats = []string{"best", "median"}
	}
	// Columns: stage × unit × stat × machine. With several stages the
	// stage names head groups of columns in a row of their own.
	var cols []tableColumn
	for _, st := range stageList {
		for _, u := range units {
			for _, s := range stats {
				recs := []*records.Record{rec}
				if ref != nil {
					recs = append(recs, ref)
				}
				for _, r := range recs {
					var parts []string
					if len(units) > 1 || len(stageList) == 1 {
						parts = append(parts, unitTitle(u))
					}
					if stat == "both" {
						parts = append(parts, s)
					}
					if ref != nil {
						parts = append(parts, machineLabel(r))
					}
					cols = append(cols, tableColumn{header: strings.Join(parts, " · "), rec: r, stage: st, unit: u, stat: s})
				}
			}
		}
	}
	grouped := len(stageList) > 1 && cols[0].header != ""
	if len(stageList) > 1 && !grouped {
		for i := range cols {
			cols[i].header = cols[i].stage
		}
	}

	var out strings.Builder
	out.WriteString(`<figure class="record-table">` + "\n")
	if c := d.arg("caption", ""); c != "" {
		out.WriteString("<figcaption>" + escapeHTML(c) + "</figcaption>\n")
	}
	out.WriteString(`<div class="table-wrap"><table>` + "\n<thead>")
	if grouped {
		out.WriteString(`<tr class="group"><th rowspan="2">benchmark</th>`)
		span := len(cols) / len(stageList)
		for _, st := range stageList {
			fmt.Fprintf(&out, `<th colspan="%d">%s</th>`, span, escapeHTML(st))
		}
		out.WriteString("</tr>\n<tr>")
	} else {
		out.WriteString("<tr><th>benchmark</th>")
	}
	for _, c := range cols {
		out.WriteString(`<th class="num">` + escapeHTML(c.header) + "</th>")
	}
	out.WriteString("</tr></thead>\n<tbody>\n")
	for _, name := range names {
		out.WriteString("<tr><td><code>" + escapeHTML(name) + "</code></td>")
		for _, c := range cols {
			cell := "—"
			title := ""
			if row, ok := findRow(c.rec, c.stage, name); ok {
				if v, ok := metricValue(row, c.unit, c.stat); ok {
					cell = tableCell(v, c.unit)
					title = fmt.Sprintf("%s %s", strconv.FormatFloat(v, 'g', -1, 64), c.unit)
				}
			}
			if title != "" {
				out.WriteString(`<td class="num" title="` + escapeHTML(title) + `">` + escapeHTML(cell) + "</td>")
			} else {
				out.WriteString(`<td class="num missing">` + cell + "</td>")
			}
		}
		out.WriteString("</tr>\n")
	}
	out.WriteString("</tbody>\n</table></div>\n")
	out.WriteString(b.sourceLine(prefix, rec, ref))
	out.WriteString("</figure>")
	return out.String(), nil
}

// tableCell formats a value for a table column. Times and bandwidths carry
// their scaled unit (a column may hold ns and µs); cores and counts, whose
// unit the header already names, are bare numbers.
func tableCell(v float64, unit string) string {
	switch classify(unit) {
	case kindTime, kindBandwidth:
		return FormatValue(v, unit)
	case kindCores:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return sigFigs(v, 3)
}
