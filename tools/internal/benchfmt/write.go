package benchfmt

import (
	"fmt"
	"io"
	"strings"
)

// StageKey is the configuration key that replaces "pkg" in text written for
// benchstat, so that `benchstat -col stage` puts stages side by side.
const StageKey = "stage"

// WriteStage writes o in benchstat's format with every "pkg:" line replaced
// by "stage: <stage>"; if o has no pkg line, a stage line is written first.
// Configuration and result lines are written as read; other lines (PASS, log
// output, --- BENCH: blocks) are dropped, since benchstat would only skip
// them.
//
// Each call ends with the stage line in force, so several outputs, one per
// stage, can be concatenated into one file.
func WriteStage(w io.Writer, o *Output, stage string) error {
	var b strings.Builder
	if _, ok := o.Config("pkg"); !ok {
		fmt.Fprintf(&b, "%s: %s\n", StageKey, stage)
	}
	for _, l := range o.Lines {
		switch {
		case l.Kind == Config && l.Key == "pkg":
			fmt.Fprintf(&b, "%s: %s\n", StageKey, stage)
		case l.Kind == Config || l.Kind == Result:
			b.WriteString(l.Text)
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
