package book

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file finds the book's directives in chapter Markdown before goldmark
// sees it, the way mdBook's preprocessors do:
//
//	{{#include STAGE/PATH:ANCHOR}}    block: alone on its line
//	{{#diff STAGE}}  {{#diff A B}}    block
//	{{#table key=value ...}}          block
//	{{#chart key=value ...}}          block
//	{{#value ...}} {{#ratio ...}} {{#meta ...}}   inline: anywhere in a line
//
// A block directive becomes a one-line HTML comment placeholder, which
// goldmark passes through as a raw HTML block and which is replaced by the
// directive's HTML after rendering; so generated HTML never meets Markdown's
// block rules (a blank line inside a <pre> would end an HTML block). An inline
// directive becomes a <span> whose text has its Markdown punctuation written
// as character references, so goldmark leaves it as it is.
//
// Inside code, as in mdBook, directives still work but yield plain text: an
// inline directive in a `code span` or a fenced block gives its bare value
// (`{{#meta record=stages field=command}}` shows the command as code), and
// {{#include}} alone on a line of a fenced block inserts the bare lines, with
// no caption. \{{# writes a literal {{# anywhere, code included, so a
// chapter can show the syntax itself.

// directive is one {{#name args}} occurrence in a chapter.
type directive struct {
	Name       string
	Args       map[string]string // key=value arguments
	Positional []string          // arguments without '='
	Text       string            // the whole directive as written, for messages
	File       string            // chapter path for messages, e.g. "book/stage0.md"
	Line       int               // 1-based line in File
}

// errorf makes an error that names the directive's file and line.
func (d directive) errorf(format string, args ...any) error {
	text := d.Text
	if len(text) > 120 {
		text = text[:117] + "..."
	}
	return fmt.Errorf("%s:%d: %s: %s", d.File, d.Line, text, fmt.Sprintf(format, args...))
}

// arg returns the named argument or def.
func (d directive) arg(key, def string) string {
	if v, ok := d.Args[key]; ok {
		return v
	}
	return def
}

// require returns the named argument or an error saying it is missing.
func (d directive) require(key string) (string, error) {
	v, ok := d.Args[key]
	if !ok || v == "" {
		return "", d.errorf("missing %s=", key)
	}
	return v, nil
}

// allow fails if the directive has an argument outside keys, so a misspelt
// key is an error and not a silently ignored option.
func (d directive) allow(keys ...string) error {
	for _, k := range d.argNames() {
		if !slices.Contains(keys, k) {
			return d.errorf("unknown argument %s= (this directive takes %s)", k, strings.Join(keys, "=, ")+"=")
		}
	}
	if len(d.Positional) > 0 {
		return d.errorf("unexpected argument %q: want key=value", d.Positional[0])
	}
	return nil
}

// allowKeys fails if the directive has a key=value argument outside keys;
// positional arguments are left to the caller.
func (d directive) allowKeys(keys ...string) error {
	for _, k := range d.argNames() {
		if !slices.Contains(keys, k) {
			return d.errorf("unknown argument %s= (this directive takes %s)", k, strings.Join(keys, "=, ")+"=")
		}
	}
	return nil
}

// positionalOnly fails if the directive has any key=value argument.
func (d directive) positionalOnly(usage string) error {
	if names := d.argNames(); len(names) > 0 {
		return d.errorf("unknown argument %s=: %s", names[0], usage)
	}
	return nil
}

// argNames returns the keys of d's arguments, sorted, so that messages do
// not depend on map order.
func (d directive) argNames() []string {
	return slices.Sorted(maps.Keys(d.Args))
}

var blockDirectives = map[string]bool{"include": true, "diff": true, "table": true, "chart": true, "records-appendix": true, "diagram": true, "timeline": true}
var inlineDirectives = map[string]bool{"value": true, "ratio": true, "meta": true, "claim": true}

// parseDirective parses body, the text between "{{#" and "}}".
func parseDirective(body string) (directive, error) {
	d := directive{Args: map[string]string{}, Text: "{{#" + body + "}}"}
	fields, err := splitFields(body)
	if err != nil {
		return d, err
	}
	if len(fields) == 0 || fields[0].quoted {
		return d, fmt.Errorf("directive has no name")
	}
	d.Name = fields[0].text
	for _, f := range fields[1:] {
		key, value, ok := strings.Cut(f.text, "=")
		if !ok || f.quotedKeyless {
			d.Positional = append(d.Positional, f.text)
			continue
		}
		if _, dup := d.Args[key]; dup {
			return d, fmt.Errorf("argument %s= given twice", key)
		}
		d.Args[key] = value
	}
	return d, nil
}

type field struct {
	text          string
	quoted        bool // the whole field was a quoted string
	quotedKeyless bool // a quoted string without key=, so an '=' inside is text
}

// splitFields splits on spaces; key="a value" and "a value" keep their
// spaces; inside quotes \" and \\ are escapes.
func splitFields(s string) ([]field, error) {
	var out []field
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		var b strings.Builder
		f := field{}
		start := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			if s[i] != '"' {
				b.WriteByte(s[i])
				i++
				continue
			}
			if i == start {
				f.quoted, f.quotedKeyless = true, true
			}
			i++ // opening quote
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if c == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return nil, fmt.Errorf("unterminated quoted string")
			}
		}
		f.text = b.String()
		out = append(out, f)
	}
}

// findDirectiveEnd returns the index of the "}}" closing the directive whose
// body starts at s[0], skipping "}}" inside quoted strings, or -1.
func findDirectiveEnd(s string) int {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch {
		case inQuote && s[i] == '\\' && i+1 < len(s):
			i++
		case s[i] == '"':
			inQuote = !inQuote
		case !inQuote && strings.HasPrefix(s[i:], "}}"):
			return i
		}
	}
	return -1
}

var fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")

// placeholder is the raw HTML line a block directive becomes.
func placeholder(n int) string { return "<!--softgpu-directive:" + strconv.Itoa(n) + "-->" }

var placeholderRE = regexp.MustCompile(`[ \t]*<!--softgpu-directive:([0-9]+)-->\n?`)

// expansion is the result of expanding one chapter's directives.
type expansion struct {
	Markdown []byte   // the chapter with placeholders and inline spans
	Blocks   []string // HTML for placeholder i
	Errs     []error
}

// inlineValue is what an inline directive found.
type inlineValue struct {
	Text  string // what the reader sees: "1.71 µs", "35×", a machine's name
	Title string // where it came from, shown on hover
	Class string // CSS class of the <span>
	Code  bool   // the text is code (a record's command): set in <code>
}

// html writes v for prose. Text and title are escaped so that neither
// Markdown nor a GFM table's '|' can touch them.
func (v inlineValue) html() string {
	if v.Code {
		return `<code class="command">` + escapeMarkdownText(v.Text) + `</code>`
	}
	title := strings.NewReplacer("|", "&#124;", "`", "&#96;").Replace(escapeHTML(v.Title))
	return `<span class="` + v.Class + `" title="` + title + `">` + escapeMarkdownText(v.Text) + `</span>`
}

// handlers renders directives; expandDirectives does not know what they mean.
type handlers struct {
	block  func(d directive) (string, error)      // HTML for a block directive
	inline func(d directive) (inlineValue, error) // an inline directive's value
	raw    func(d directive) (string, error)      // an include's bare lines, for a fenced block
}

// expandDirectives replaces every directive in src. file names the chapter in
// messages. It keeps going after an error so one build reports them all.
func expandDirectives(file string, src []byte, h handlers) expansion {
	var x expansion
	lines := strings.SplitAfter(string(src), "\n")
	var out strings.Builder
	fenceChar, fenceLen := byte(0), 0
	for i, line := range lines {
		lineNo := i + 1
		body, nl := strings.CutSuffix(line, "\n")
		newline := func() {
			if nl {
				out.WriteByte('\n')
			}
		}
		inFence := fenceLen > 0
		if inFence {
			t := strings.TrimSpace(body)
			if len(t) >= fenceLen && t[0] == fenceChar && strings.Trim(t, string(fenceChar)) == "" {
				fenceChar, fenceLen = 0, 0
				out.WriteString(line)
				continue
			}
		} else if m := fenceOpen.FindStringSubmatch(body); m != nil {
			fenceChar, fenceLen = m[1][0], len(m[1])
			out.WriteString(line)
			continue
		}

		// A block directive alone on its line.
		indent := body[:len(body)-len(strings.TrimLeft(body, " \t"))]
		if d, ok := wholeLineDirective(body); ok && blockDirectives[d.Name] {
			d.File, d.Line = file, lineNo
			switch {
			case inFence && d.Name == "include":
				text, err := h.raw(d)
				if err != nil {
					x.Errs = append(x.Errs, err)
				}
				for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
					out.WriteString(strings.TrimRight(indent+l, " \t") + "\n")
				}
				continue
			case inFence:
				x.Errs = append(x.Errs, d.errorf("{{#%s}} cannot go inside a fenced code block; put it on its own line outside the fence", d.Name))
				out.WriteString(line)
				continue
			}
			html, err := h.block(d)
			if err != nil {
				x.Errs = append(x.Errs, err)
				html = `<p class="directive-error">` + escapeHTML(err.Error()) + `</p>`
			}
			out.WriteString(indent + placeholder(len(x.Blocks)))
			x.Blocks = append(x.Blocks, html)
			newline()
			continue
		}

		expanded, errs := expandInline(file, lineNo, body, inFence, h)
		x.Errs = append(x.Errs, errs...)
		out.WriteString(expanded)
		newline()
	}
	x.Markdown = []byte(out.String())
	return x
}

// wholeLineDirective parses line if it is exactly one directive.
func wholeLineDirective(line string) (directive, bool) {
	trimmed := strings.TrimSpace(line)
	if !strings.HasPrefix(trimmed, "{{#") {
		return directive{}, false
	}
	end := findDirectiveEnd(trimmed[3:])
	if end < 0 || 3+end+2 != len(trimmed) {
		return directive{}, false
	}
	d, err := parseDirective(trimmed[3 : 3+end])
	return d, err == nil
}

// expandInline expands the inline directives of one line and turns \{{#
// into {{#. Inside code (a code span, or a whole line of a fenced block when
// inCode) a directive yields its bare text.
func expandInline(file string, lineNo int, line string, inCode bool, h handlers) (string, []error) {
	if !strings.Contains(line, "{{#") {
		return line, nil
	}
	var errs []error
	var b strings.Builder
	spanEnd := -1 // while inside a code span: index of its closing backticks
	spanLen := 0
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case i == spanEnd:
			b.WriteString(line[i : i+spanLen])
			i += spanLen
			spanEnd = -1
		case c == '`' && spanEnd < 0 && !inCode:
			// A run of n backticks opens a code span if a run of exactly
			// n backticks closes it later on the line.
			n := 0
			for i+n < len(line) && line[i+n] == '`' {
				n++
			}
			if closeAt := findBacktickRun(line, i+n, n); closeAt >= 0 {
				spanEnd, spanLen = closeAt, n
			}
			b.WriteString(line[i : i+n])
			i += n
		case c == '\\' && strings.HasPrefix(line[i+1:], "{{#"):
			b.WriteString("{{#")
			i += 4
		case strings.HasPrefix(line[i:], "{{#"):
			end := findDirectiveEnd(line[i+3:])
			if end < 0 {
				errs = append(errs, directive{File: file, Line: lineNo, Text: line[i:]}.errorf("no closing }}"))
				b.WriteString(line[i:])
				i = len(line)
				continue
			}
			d, err := parseDirective(line[i+3 : i+3+end])
			d.File, d.Line = file, lineNo
			i += 3 + end + 2
			inSpan := spanEnd >= 0
			if inSpan && i > spanEnd {
				spanEnd = -1 // the directive ran past the span's closing backticks
			}
			var v inlineValue
			switch {
			case err != nil:
				err = d.errorf("%v", err)
			case blockDirectives[d.Name]:
				err = d.errorf("{{#%s}} makes a block: put it alone on its own line", d.Name)
			case !inlineDirectives[d.Name]:
				err = d.errorf("unknown directive %q (known: include, diff, table, chart, diagram, timeline, records-appendix, value, ratio, meta, claim)", d.Name)
			default:
				v, err = h.inline(d)
			}
			switch {
			case err != nil:
				errs = append(errs, err)
				b.WriteString(`<span class="directive-error">` + escapeMarkdownText(err.Error()) + `</span>`)
			case inCode || inSpan:
				b.WriteString(v.Text)
			default:
				b.WriteString(v.html())
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), errs
}

// findBacktickRun returns the index of the next run of exactly n backticks at
// or after from, or -1.
func findBacktickRun(s string, from, n int) int {
	for i := from; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// escapeMarkdownText writes s so that goldmark shows it verbatim inside
// inline HTML: every ASCII punctuation character becomes a numeric character
// reference, which Markdown decodes but never treats as syntax.
func escapeMarkdownText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && r > ' ' && !('0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			fmt.Fprintf(&b, "&#%d;", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// escapeHTML escapes text for HTML element content and attribute values.
func escapeHTML(s string) string {
	return htmlEscaper.Replace(s)
}

var htmlEscaper = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;", `'`, "&#39;")

// fillPlaceholders replaces block placeholders in rendered HTML.
func fillPlaceholders(html []byte, blocks []string) []byte {
	return placeholderRE.ReplaceAllFunc(html, func(m []byte) []byte {
		sub := placeholderRE.FindSubmatch(m)
		n, _ := strconv.Atoi(string(sub[1]))
		if n >= len(blocks) {
			return m
		}
		return []byte(blocks[n] + "\n")
	})
}
