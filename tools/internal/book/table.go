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

// tableHTML renders {{#table record= stage= bench= unit= [ref=] [stat=] [noisy=] [caption=]}}.
func (b *builder) tableHTML(d directive, prefix string) (string, error) {
	if err := d.allow("record", "stage", "bench", "unit", "ref", "stat", "noisy", "caption"); err != nil {
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
	noisy, err := parseNoisy(d)
	if err != nil {
		return "", err
	}
	if err := checkPassRows(d, sel, stat); err != nil {
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
	// Columns: stage × unit × stat × machine, each headed by its unit and
	// statistic. With several stages the stage names head groups of
	// columns in a row of their own.
	var cols []tableColumn
	for _, st := range stageList {
		for _, u := range units {
			for _, s := range stats {
				recs := []*records.Record{rec}
				if ref != nil {
					recs = append(recs, ref)
				}
				for _, r := range recs {
					rs := s
					if r != rec {
						rs = refStat(s)
					}
					parts := []string{unitTitle(u), statHeader(rs)}
					if ref != nil {
						parts = append(parts, machineLabel(r))
					}
					cols = append(cols, tableColumn{header: strings.Join(parts, " · "), rec: r, stage: st, unit: u, stat: rs})
				}
			}
		}
	}
	grouped := len(stageList) > 1

	// Cells first: a row is marked noisy when any of its cells is.
	type tableCellHTML struct {
		html  string
		noisy bool
	}
	var body strings.Builder
	anySpread := false
	for _, name := range names {
		var cells []tableCellHTML
		var noisyWhy []string
		for _, c := range cols {
			row, ok := findRow(c.rec, c.stage, name)
			var f figure
			if ok {
				f, ok = rowFigure(row, c.unit, c.stat)
			}
			if !ok {
				cells = append(cells, tableCellHTML{html: `<td class="num missing">—</td>`})
				continue
			}
			if err := b.noteShown(d, c.rec, c.stage, name, c.unit, c.stat, f.Value); err != nil {
				return "", err
			}
			// With stat=both the spread goes with the median column only.
			showSpread := f.hasSpread() && !(stat == "both" && c.stat == "best")
			class := "num"
			text := escapeHTML(tableCell(f.Value, c.unit))
			isNoisy := showSpread && f.noisy(noisy)
			if showSpread {
				anySpread = true
				text += ` <span class="pm">` + escapeHTML(f.plusMinus(c.unit)) + `</span>`
			}
			if isNoisy {
				class += " noisy"
				noisyWhy = append(noisyWhy, fmt.Sprintf("%s %s: (max − min)/median %s", c.stage, unitTitle(c.unit), percent(f.spread())))
			}
			title := fmt.Sprintf("%s %s, %s", strconv.FormatFloat(f.Value, 'g', -1, 64), c.unit, f.rangeText(c.unit))
			cells = append(cells, tableCellHTML{html: `<td class="` + class + `" title="` + escapeHTML(title) + `">` + text + "</td>", noisy: isNoisy})
		}
		rowClass := ""
		mark := ""
		if len(noisyWhy) > 0 {
			rowClass = ` class="noisy"`
			mark = ` <span class="noisy-mark" title="` + escapeHTML(strings.Join(noisyWhy, "; ")+"; over "+percent(noisy)) + `">noisy</span>`
		}
		body.WriteString("<tr" + rowClass + "><td><code>" + escapeHTML(name) + "</code>" + mark + "</td>")
		for _, c := range cells {
			body.WriteString(c.html)
		}
		body.WriteString("</tr>\n")
	}

	var out strings.Builder
	out.WriteString(`<figure class="record-table">` + "\n")
	if c := d.arg("caption", ""); c != "" {
		out.WriteString("<figcaption>" + escapeHTML(c) + "</figcaption>\n")
	}
	out.WriteString(scrollRegion("table-wrap", tableLabel(d.arg("caption", ""))) + "<table>\n<thead>")
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
	out.WriteString(body.String())
	out.WriteString("</tbody>\n</table></div>\n")
	out.WriteString(statNote(stat, acceptedPasses(rec), anySpread, noisy, "table"))
	out.WriteString(b.provenance(prefix, rec, ref))
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
