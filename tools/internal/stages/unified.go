package stages

import (
	"fmt"
	"strings"
)

// Unified-format output of a line diff, in the shape GNU diff and git print
// and that `git apply` and `patch -p1` accept: hunks of changed lines with
// three lines of context, a "\ No newline at end of file" marker where a
// file's last line has no newline.

const contextLines = 3

// splitLines splits text into lines, each keeping its "\n"; a last line
// without one is kept as it is, so that "x" and "x\n" differ.
func splitLines(text string) []string {
	var lines []string
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			lines = append(lines, text)
			break
		}
		lines = append(lines, text[:i+1])
		text = text[i+1:]
	}
	return lines
}

// countChanges returns the number of inserted and deleted lines in script.
func countChanges(script []edit) (added, removed int) {
	for _, e := range script {
		switch e.kind {
		case opInsert:
			added++
		case opDelete:
			removed++
		}
	}
	return added, removed
}

// writeHunks appends the hunks of script (from a to b) to out.
func writeHunks(out *strings.Builder, a, b []string, script []edit) {
	for start := 0; start < len(script); {
		// Find the next change, then extend the hunk while the gap of equal
		// lines to the change after it is short enough to share context.
		first := start
		for first < len(script) && script[first].kind == opEqual {
			first++
		}
		if first == len(script) {
			return
		}
		lo := max(first-contextLines, start)
		last := first // last change in this hunk
		for i := first + 1; i < len(script); i++ {
			if script[i].kind == opEqual {
				continue
			}
			if i-last-1 > 2*contextLines {
				break
			}
			last = i
		}
		hi := min(last+1+contextLines, len(script))
		writeHunk(out, a, b, script[lo:hi])
		start = hi
	}
}

func writeHunk(out *strings.Builder, a, b []string, hunk []edit) {
	aStart, bStart := hunk[0].aLine, hunk[0].bLine
	aCount, bCount := 0, 0
	for _, e := range hunk {
		if e.kind != opInsert {
			aCount++
		}
		if e.kind != opDelete {
			bCount++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
	for _, e := range hunk {
		switch e.kind {
		case opEqual:
			writeLine(out, ' ', a[e.aLine])
		case opDelete:
			writeLine(out, '-', a[e.aLine])
		case opInsert:
			writeLine(out, '+', b[e.bLine])
		}
	}
}

// hunkRange formats one side of a hunk header: the 1-based first line and
// the count, the count left out when it is 1, and an empty range given as
// the line before it, as diff does.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

func writeLine(out *strings.Builder, prefix byte, line string) {
	out.WriteByte(prefix)
	out.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		out.WriteString("\n\\ No newline at end of file\n")
	}
}
