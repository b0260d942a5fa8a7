package book

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// This file reads book/SUMMARY.md, the table of contents in mdBook's format:
//
//	# Summary                     the title line (another title names the book)
//
//	[Preface](preface.md)         prefix chapters: unnumbered, before the list
//
//	# Part title                  optional part headings between groups
//
//	- [A chapter](a.md)           numbered chapters, nested by indentation
//	    - [A section](a/b.md)
//	- [Not written yet]()         a draft: listed, greyed out, no page
//
//	---                           a separator in the sidebar
//
//	[Appendix](appendix.md)       suffix chapters: unnumbered, after the list
//
// Anything else is an error naming SUMMARY.md and the line.

// Summary is a parsed SUMMARY.md.
type Summary struct {
	Title string // the first heading, "Summary" in the usual file
	Items []Item // sidebar entries in order
}

// ItemKind says what a sidebar entry is.
type ItemKind int

const (
	ItemChapter   ItemKind = iota
	ItemPart               // a "# Part title" heading
	ItemSeparator          // a "---" line
)

// Item is one sidebar entry.
type Item struct {
	Kind   ItemKind
	Title  string // chapter or part title
	Path   string // chapter file relative to the book directory; "" for a draft
	Number []int  // mdBook's section number of a list item (1.2 → [1 2]); nil otherwise
	Label  string // the number the book shows: "A" for the first appendix; "" for none (see labelChapters)
	Level  int    // nesting depth of a numbered chapter, 0 at the top
	Line   int    // line in SUMMARY.md
}

// NumberString renders the section number as the sidebar shows it: "1.2.".
func (it Item) NumberString() string {
	if len(it.Number) == 0 {
		return ""
	}
	var b strings.Builder
	for _, n := range it.Number {
		b.WriteString(strconv.Itoa(n))
		b.WriteByte('.')
	}
	return b.String()
}

// Chapters returns the chapter entries that have pages (not drafts), in
// reading order.
func (s *Summary) Chapters() []Item {
	var out []Item
	for _, it := range s.Items {
		if it.Kind == ItemChapter && it.Path != "" {
			out = append(out, it)
		}
	}
	return out
}

var (
	summaryLink      = regexp.MustCompile(`^\[(.*)\]\((.*)\)$`)
	summaryListItem  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	summaryHeading   = regexp.MustCompile(`^#{1,6}[ \t]+(.+?)[ \t#]*$`)
	summarySeparator = regexp.MustCompile(`^ {0,3}(-{3,}|\*{3,}|_{3,})[ \t]*$`)
)

// ParseSummary parses the text of SUMMARY.md. name is used in error messages.
func ParseSummary(name string, text []byte) (*Summary, error) {
	s := &Summary{}
	type phase int
	const (
		prefix phase = iota
		numbered
		suffix
	)
	state := prefix
	var indents []int  // indentation of each open list level
	var counters []int // the running number at each open level
	seen := map[string]int{}
	sawTitle := false

	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	for i, raw := range lines {
		lineNo := i + 1
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", name, lineNo, fmt.Sprintf(format, args...))
		}
		line := strings.TrimRight(raw, " \t")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "<!--") && strings.HasSuffix(line, "-->") {
			continue // a one-line comment
		}
		addChapter := func(it Item) error {
			if it.Path != "" {
				clean, err := cleanChapterPath(it.Path)
				if err != nil {
					return fail("%v", err)
				}
				if prev, dup := seen[clean]; dup {
					return fail("%s is already listed on line %d", clean, prev)
				}
				seen[clean] = lineNo
				it.Path = clean
			}
			if strings.TrimSpace(it.Title) == "" {
				return fail("chapter link has no title")
			}
			it.Kind, it.Line = ItemChapter, lineNo
			s.Items = append(s.Items, it)
			return nil
		}

		switch {
		case summarySeparator.MatchString(line):
			s.Items = append(s.Items, Item{Kind: ItemSeparator, Line: lineNo})

		case summaryHeading.MatchString(line):
			title := summaryHeading.FindStringSubmatch(line)[1]
			if !sawTitle && len(s.Items) == 0 {
				s.Title, sawTitle = title, true
				continue
			}
			if state == suffix {
				return nil, fail("part title %q after the suffix chapters; parts go between numbered chapters", title)
			}
			s.Items = append(s.Items, Item{Kind: ItemPart, Title: title, Line: lineNo})
			indents, counters = indents[:0], counters[:min(len(counters), 1)] // a part starts at the top level

		case summaryListItem.MatchString(line):
			if state == suffix {
				return nil, fail("numbered chapter after the suffix chapters")
			}
			state = numbered
			m := summaryListItem.FindStringSubmatch(line)
			indent := indentWidth(m[1])
			link := summaryLink.FindStringSubmatch(strings.TrimSpace(m[2]))
			if link == nil {
				return nil, fail("want a list item of the form - [Title](file.md), got %q", strings.TrimSpace(line))
			}
			// Find this item's level: pop deeper levels, push a new one if
			// it is indented further than the current level.
			for len(indents) > 0 && indent < indents[len(indents)-1] {
				indents = indents[:len(indents)-1]
			}
			switch {
			case len(indents) == 0:
				indents = append(indents, indent)
			case indent > indents[len(indents)-1]:
				indents = append(indents, indent)
			}
			level := len(indents) - 1
			if level > len(counters) {
				return nil, fail("list item is nested deeper than its parent")
			}
			// counters[l] is the number of the last chapter at level l under
			// the current parent; numbering runs on across part titles, as in
			// mdBook.
			counters = counters[:min(len(counters), level+1)]
			if len(counters) == level {
				counters = append(counters, 0)
			}
			counters[level]++
			num := append([]int(nil), counters[:level+1]...)
			if err := addChapter(Item{Title: link[1], Path: strings.TrimSpace(link[2]), Number: num, Level: level}); err != nil {
				return nil, err
			}

		case summaryLink.MatchString(strings.TrimSpace(line)):
			if state == numbered {
				state = suffix
			}
			link := summaryLink.FindStringSubmatch(strings.TrimSpace(line))
			if strings.TrimSpace(link[2]) == "" {
				return nil, fail("a prefix or suffix chapter cannot be a draft; only numbered chapters may have an empty link")
			}
			if err := addChapter(Item{Title: link[1], Path: strings.TrimSpace(link[2])}); err != nil {
				return nil, err
			}

		default:
			return nil, fail("cannot read %q: want # heading, [Title](file.md), - [Title](file.md) or ---", strings.TrimSpace(line))
		}
	}
	if len(s.Chapters()) == 0 {
		return nil, fmt.Errorf("%s: no chapters", name)
	}
	if err := labelChapters(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// stageTitleRE reads the stage number a chapter's title starts with.
var stageTitleRE = regexp.MustCompile(`^Stage ([0-9]+)\b`)

// labelChapters numbers the chapters the way the book shows them, so that
// numbers mean one thing: the chapter for stage N is the one whose file is
// named for the stage (stageN-name.md), and its title must start "Stage N",
// which is its number; no other chapter is numbered, except appendices —
// the top-level chapters under a part whose title starts "Appendix", and
// the suffix chapters — which are lettered A, B, C, ... in order. mdBook's
// list numbers (Item.Number) are not shown: they would give stage 0 the
// number 2.
func labelChapters(name string, s *Summary) error {
	inAppendix, suffix := false, false
	letter := 0
	for i := range s.Items {
		it := &s.Items[i]
		switch it.Kind {
		case ItemPart:
			inAppendix = strings.HasPrefix(strings.ToLower(it.Title), "appendi")
			continue
		case ItemSeparator:
			continue
		}
		if it.Number == nil && s.hasNumberedBefore(i) {
			suffix = true // mdBook's suffix chapters: unnumbered, after the list
		}
		base := strings.TrimSuffix(path.Base(it.Path), ".md")
		if m := stageFileRE.FindStringSubmatch(base); m != nil {
			t := stageTitleRE.FindStringSubmatch(it.Title)
			if t == nil || t[1] != m[1] {
				return fmt.Errorf("%s:%d: %s is the chapter for stage %s: its title must start \"Stage %s\", got %q", name, it.Line, it.Path, m[1], m[1], it.Title)
			}
			continue
		}
		if (inAppendix && it.Level == 0 && it.Number != nil) || suffix {
			it.Label = string(rune('A' + letter%26))
			letter++
		}
	}
	return nil
}

// stageFileRE reads the stage number of a chapter file named for a stage.
var stageFileRE = regexp.MustCompile(`^stage([0-9]+)-[a-z0-9-]+$`)

// hasNumberedBefore reports whether a numbered chapter precedes item i.
func (s *Summary) hasNumberedBefore(i int) bool {
	for _, it := range s.Items[:i] {
		if it.Kind == ItemChapter && it.Number != nil {
			return true
		}
	}
	return false
}

func indentWidth(s string) int {
	w := 0
	for _, r := range s {
		if r == '\t' {
			w += 4 - w%4
		} else {
			w++
		}
	}
	return w
}

// cleanChapterPath checks a chapter link and returns it slash-cleaned.
func cleanChapterPath(p string) (string, error) {
	if strings.Contains(p, "#") || strings.Contains(p, "?") {
		return "", fmt.Errorf("chapter link %q: a chapter is a whole file, without #fragment", p)
	}
	if path.IsAbs(p) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("chapter link %q: want a path relative to the book directory", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("chapter link %q leaves the book directory", p)
	}
	if !strings.HasSuffix(clean, ".md") {
		return "", fmt.Errorf("chapter link %q: want a .md file", p)
	}
	if clean == "SUMMARY.md" {
		return "", fmt.Errorf("SUMMARY.md cannot be a chapter")
	}
	return clean, nil
}
