package book

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"softgpu/tools/internal/trace"
)

// This file implements {{#timeline trace=NAME [from=US] [to=US] [first=US]
// [title="..."] [caption="..."]}}: the device trace book/traces/NAME.json
// drawn by package trace as an inline SVG timeline, under it the line that
// says how it was made, from NAME.meta.json (which `trace make` writes
// beside it): the command, copyable, its commit, date and machine. A missing
// trace or meta file, a trace package trace refuses, or a window that is
// empty or shows no event fails the build. from and to are microseconds of device time; first=US
// shows the first US microseconds instead.

// timelineHTML renders {{#timeline}}.
func (b *builder) timelineHTML(d directive, prefix string) (string, error) {
	if err := d.allow("trace", "from", "to", "first", "title", "caption"); err != nil {
		return "", err
	}
	name, err := d.require("trace")
	if err != nil {
		return "", err
	}
	if !diagramNameRE.MatchString(name) {
		return "", d.errorf("trace=%s: want the file name of book/traces/NAME.json without .json", name)
	}
	var opt trace.TimelineOptions
	for _, w := range []struct {
		key string
		v   *float64
	}{{"from", &opt.From}, {"to", &opt.To}, {"first", &opt.First}} {
		if s, ok := d.Args[w.key]; ok {
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(s, "us"), "µs"), 64)
			if err != nil || v < 0 {
				return "", d.errorf("%s=%s: want microseconds of device time, like 120 or 120us", w.key, s)
			}
			*w.v = v
		}
	}
	opt.Title = d.arg("title", "") // none: the SVG is named "Timeline of STAGE", the caption says the rest
	caption := d.arg("caption", "")

	dir := filepath.Join(b.cfg.BookDir, "traces")
	p := filepath.Join(dir, name+".json")
	if _, err := insideRoot(b.cfg.BookDir, p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", d.errorf("no trace %s: %s does not exist (traces: %s)", name, b.display(p), listTraces(dir))
		}
		return "", d.errorf("%v", err)
	}
	t, err := trace.Load(p)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	metaPath := trace.MetaPath(p)
	if _, err := insideRoot(b.cfg.BookDir, metaPath); err != nil {
		return "", d.errorf("trace %s has no %s saying how it was made (trace make writes it): %v", name, filepath.Base(metaPath), err)
	}
	meta, err := trace.LoadMeta(metaPath)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	svg, err := trace.RenderSVG(t, opt)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	// A figure of nothing under a caption that describes something is
	// the mistake a moved window makes when a trace is re-taken.
	if n, err := opt.EventsShown(t); err != nil || n == 0 {
		return "", d.errorf("trace %s shows no event in this window (its events span %s); move from= and to= to what the caption describes", name, spanText(t))
	}
	var out strings.Builder
	out.WriteString(`<figure class="timeline">` + "\n" + `<div class="timeline-wrap">` + themeTimeline(svg) + "</div>\n")
	out.WriteString(figureEnd(caption, traceMadeBy(prefix, name, meta)))
	return out.String(), nil
}

func listTraces(dir string) string {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var names []string
	for _, p := range paths {
		if !strings.HasSuffix(p, ".meta.json") {
			names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// traceMadeBy is the line under a timeline: which trace, the command that
// made it (copyable), its commit, date and machine.
func traceMadeBy(prefix, name string, m *trace.Meta) string {
	var facts []string
	if d := shortDate(m.Date); d != "" {
		facts = append(facts, d)
	}
	mc := m.Machine.CPU
	if m.Machine.Cores > 0 {
		mc += fmt.Sprintf(", %d cores", m.Machine.Cores)
	}
	if m.Machine.OS != "" {
		mc += ", " + m.Machine.OS
	}
	if strings.TrimSpace(mc) != "" {
		facts = append(facts, strings.TrimPrefix(mc, ", "))
	}
	s := `<p class="reproduce">Trace <a href="` + escapeHTML(prefix) + `traces/` + escapeHTML(name) + `.json">` + escapeHTML(name) + ".json</a>"
	if m.Stage != "" {
		s += " of <code>" + escapeHTML(m.Stage) + "</code>"
	}
	if m.Command != "" {
		s += `, made by <code class="command">` + escapeHTML(m.Command) + `</code>`
	}
	if hash, dirty := strings.CutSuffix(m.Commit, "+dirty"); hash != "" {
		s += " at commit <code>" + escapeHTML(shortCommit(hash)) + "</code>"
		if dirty {
			s += ` <strong class="dirty">` + dirtyNote + `</strong>`
		}
	}
	if len(facts) > 0 {
		s += " (" + escapeHTML(strings.Join(facts, "; ")) + ")"
	}
	return s + ".</p>\n"
}

// timelineDarkRE finds the dark half of package trace's stylesheet, which
// follows only the reader's preference.
var timelineDarkRE = regexp.MustCompile(`(?s)@media \(prefers-color-scheme: dark\)\{\n(.*?)\}\n</style>`)

// themeTimeline makes a timeline follow the page's theme button too: each
// dark rule applies when the page is pinned dark, or when the reader
// prefers dark and the page is not pinned light.
func themeTimeline(svg string) string {
	m := timelineDarkRE.FindStringSubmatchIndex(svg)
	if m == nil {
		return svg
	}
	var pinned, preferred strings.Builder
	for _, rule := range strings.Split(strings.TrimSuffix(svg[m[2]:m[3]], "\n"), "\n") {
		if rule == "" {
			continue
		}
		pinned.WriteString(`:root[data-theme="dark"] ` + rule + "\n")
		preferred.WriteString(`:root:not([data-theme="light"]) ` + rule + "\n")
	}
	return svg[:m[0]] + pinned.String() + "@media (prefers-color-scheme: dark){\n" + preferred.String() + "}\n</style>" + svg[m[1]:]
}

// spanText is where a trace's events lie, in microseconds of device time,
// for a message.
func spanText(t *trace.Trace) string {
	first, last := t.Span()
	return fmt.Sprintf("%.2f to %.2f µs", float64(first)/1e3, float64(last)/1e3)
}
