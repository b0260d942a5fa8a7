// Package wrap fills lines of text for the tools' fixed-width output: the
// titles and captions drawn in the book's SVG charts and trace timelines,
// and the provenance sentence tools/cmd/numbers writes into each README.
package wrap

import "unicode/utf8"

// Words lays words out greedily on lines of at most width characters
// (runes, not bytes: "µs" is two), one space between two words on a line.
// A word longer than width stands on a line of its own rather than being
// cut. Callers choose what a word is: strings.Fields for plain text, or a
// splitter that keeps a code span whole.
func Words(words []string, width int) []string {
	var lines []string
	line, n := "", 0 // the line being filled and its length in runes
	for _, w := range words {
		wn := utf8.RuneCountInString(w)
		switch {
		case line == "":
			line, n = w, wn
		case n+1+wn <= width:
			line, n = line+" "+w, n+1+wn
		default:
			lines = append(lines, line)
			line, n = w, wn
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
