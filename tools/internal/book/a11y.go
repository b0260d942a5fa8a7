package book

import (
	"fmt"
	"regexp"
	"strings"
)

// This file holds the markup rules that keep the book's pages valid HTML
// (the W3C Nu checker) and accessible (axe-core's WCAG 2 A and AA rules),
// shared by the directives that write figures and scrolling regions.
// tools/cmd/bookcheck and .ci/run check the built pages against both.

// figureEnd closes a figure whose drawing or table is already written: a
// <figcaption> must be a figure's first or last child, so a caption that
// follows the drawing also holds the notes under it (statistic, source,
// reproduce line); with no caption the notes stand alone.
func figureEnd(caption, notes string) string {
	if caption == "" {
		return notes + "</figure>"
	}
	return "<figcaption>" + escapeHTML(caption) + "\n" + notes + "</figcaption>\n</figure>"
}

// scrollRegion opens a block that scrolls sideways (a wide table or
// listing) so that a keyboard reaches it: focusable (tabindex 0), a region
// named by label (read out when it takes focus), drawn with a focus ring
// by style.css's :focus-visible rule.
func scrollRegion(class, label string) string {
	return `<div class="` + class + `" tabindex="0" role="region" aria-label="` + escapeHTML(label) + `">`
}

// preOpen opens a <pre> code block as a scrolling region (see
// scrollRegion): its name says what language the code is in.
func preOpen(class, style, lang string) string {
	s := `<pre class="` + class + `"`
	if style != "" {
		s += ` style="` + style + `"`
	}
	return s + ` tabindex="0" role="region" aria-label="` + escapeHTML(codeLabel(lang)) + `"><code>`
}

// codeLabel names a code block for a screen reader by its language.
func codeLabel(lang string) string {
	switch strings.ToLower(lang) {
	case "go":
		return "Go code"
	case "c", "h":
		return "C code"
	case "sh", "bash", "shell", "console", "shell-session":
		return "Shell commands"
	case "", "text", "plaintext", "txt":
		return "Text"
	case "md", "markdown":
		return "Markdown"
	}
	return lang + " code"
}

// tableLabel names a record table's scrolling region: its caption's first
// sentence, or "Measurements".
func tableLabel(caption string) string {
	if i := strings.IndexAny(caption, ".:;"); i > 0 {
		caption = caption[:i]
	}
	if caption = strings.TrimSpace(caption); caption == "" {
		return "Measurements"
	}
	return caption
}

// chartTable is a chart's figures as a table, folded under the drawing: the
// text equivalent a screen reader reaches (the drawing is one image named
// by its title). Rows are the categories, columns the series; a spread is
// written as the passes' range.
func chartTable(data *chartData) string {
	var b strings.Builder
	b.WriteString(`<details class="chart-data"><summary>The chart's figures as a table</summary>` + "\n")
	b.WriteString(scrollRegion("table-wrap", "Figures of: "+data.Title) + "<table>\n")
	b.WriteString("<caption>" + escapeHTML(data.Title) + " (" + escapeHTML(data.YLabel) + ")</caption>\n")
	xHead := data.XLabel
	if xHead == "" {
		xHead = "benchmark"
	}
	b.WriteString(`<thead><tr><th scope="col">` + escapeHTML(xHead) + "</th>")
	for _, s := range data.Series {
		b.WriteString(`<th scope="col">` + escapeHTML(s.Name) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for i, x := range data.X {
		b.WriteString(`<tr><th scope="row">` + escapeHTML(x) + "</th>")
		for _, s := range data.Series {
			if i >= len(s.Has) || !s.Has[i] {
				b.WriteString(`<td class="num missing">—</td>`)
				continue
			}
			cell := FormatValue(s.Values[i], data.Unit)
			if s.hasRange(i) {
				cell += " (" + FormatValue(s.Lo[i], data.Unit) + " to " + FormatValue(s.Hi[i], data.Unit) + ")"
			}
			b.WriteString(`<td class="num">` + escapeHTML(cell) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>\n</details>\n")
	return b.String()
}

// namedImage makes an inlined diagram one image to a screen reader
// (role="img" on its root, unless it has a role), named by its <title>,
// which must say what it shows: a diagram without one is an error.
func namedImage(svg string) (string, error) {
	end := strings.IndexByte(svg, '>')
	if end < 0 {
		return "", fmt.Errorf("no <svg> start tag")
	}
	title := svgTitleRE.FindStringSubmatch(svg)
	if title == nil || strings.TrimSpace(title[1]) == "" {
		return "", fmt.Errorf("no <title> saying what the diagram shows: a screen reader reads it in place of the drawing")
	}
	if !strings.Contains(svg[:end], " role=") {
		if rest, ok := strings.CutPrefix(svg, `<svg class="diagram"`); ok {
			return `<svg class="diagram" role="img"` + rest, nil
		}
		return `<svg role="img"` + svg[len("<svg"):], nil
	}
	return svg, nil
}

// svgTitleRE finds a diagram's first <title>, its name.
var svgTitleRE = regexp.MustCompile(`(?s)<title>(.*?)</title>`)
