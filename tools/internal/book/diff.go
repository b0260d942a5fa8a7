package book

import (
	"fmt"
	"strings"
	"sync"

	"softgpu/tools/internal/stages"
)

// This file implements {{#diff STAGE}} and {{#diff A B}}: what a stage
// changed, as a table of files with their added and removed line counts and
// the whole unified diff, highlighted and folded in a <details>. The diff is
// normalised (each stage's module path replaced by a placeholder) by package
// stages, so only the mechanism shows.

// Differ gives the book stage diffs. The build uses StagesDiffer; tests use
// a fake.
type Differ interface {
	// Predecessor returns the stage that stage was copied from.
	Predecessor(stage string) (string, error)
	// Diff returns the normalised diff from stage a to stage b.
	Diff(a, b string) (*stages.Diff, error)
}

// StagesDiffer diffs the stage directories under Root with package stages,
// each pair once per build.
type StagesDiffer struct {
	Root string

	mu    sync.Mutex
	cache map[[2]string]*stages.Diff // guarded by mu
}

func (s *StagesDiffer) Predecessor(stage string) (string, error) {
	st, ok := stages.Lookup(stage)
	if !ok {
		return "", fmt.Errorf("unknown stage %q (stages: %s)", stage, strings.Join(stages.Dirs(stages.Order), ", "))
	}
	if st.Predecessor == "" {
		return "", fmt.Errorf("%s is the first stage: it has no predecessor to diff against", stage)
	}
	return st.Predecessor, nil
}

func (s *StagesDiffer) Diff(a, b string) (*stages.Diff, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := [2]string{a, b}
	if d, ok := s.cache[key]; ok {
		return d, nil
	}
	for _, dir := range []string{a, b} {
		if err := stages.CheckExists(s.Root, dir); err != nil {
			return nil, err
		}
	}
	d, err := stages.DiffStages(s.Root, a, b)
	if err != nil {
		return nil, err
	}
	if s.cache == nil {
		s.cache = map[[2]string]*stages.Diff{}
	}
	s.cache[key] = d
	return d, nil
}

// diffHTML renders a diff directive.
func (b *builder) diffHTML(d directive) (string, error) {
	if err := d.positionalOnly("want {{#diff STAGE}} or {{#diff A B}}"); err != nil {
		return "", err
	}
	if b.cfg.Differ == nil {
		return "", d.errorf("no stage differ configured")
	}
	var from, to string
	switch len(d.Positional) {
	case 1:
		to = d.Positional[0]
		pred, err := b.cfg.Differ.Predecessor(to)
		if err != nil {
			return "", d.errorf("%v", err)
		}
		from = pred
	case 2:
		from, to = d.Positional[0], d.Positional[1]
	default:
		return "", d.errorf("want {{#diff STAGE}} or {{#diff A B}}")
	}
	diff, err := b.cfg.Differ.Diff(from, to)
	if err != nil {
		return "", d.errorf("%v", err)
	}

	var out strings.Builder
	added, removed := 0, 0
	for _, f := range diff.Files {
		added += f.Added
		removed += f.Removed
	}
	out.WriteString(`<figure class="stage-diff">` + "\n")
	fmt.Fprintf(&out, "<figcaption>From <code>%s</code> to <code>%s</code>: %d files changed, +%d −%d lines (module paths normalised)</figcaption>\n",
		escapeHTML(from), escapeHTML(to), len(diff.Files), added, removed)
	if len(diff.Files) == 0 {
		out.WriteString("<p>No differences.</p>\n</figure>")
		return out.String(), nil
	}
	out.WriteString(`<div class="table-wrap"><table class="diffstat">` + "\n<thead><tr><th>file</th><th>status</th><th class=\"num\">added</th><th class=\"num\">removed</th></tr></thead>\n<tbody>\n")
	for _, f := range diff.Files {
		add, rem := fmt.Sprintf("+%d", f.Added), fmt.Sprintf("−%d", f.Removed)
		if f.Binary {
			add, rem = "binary", ""
		}
		fmt.Fprintf(&out, `<tr class="%s"><td><code>%s</code></td><td>%s</td><td class="num added">%s</td><td class="num removed">%s</td></tr>`+"\n",
			escapeHTML(f.Status), escapeHTML(f.Path), escapeHTML(f.Status), add, rem)
	}
	out.WriteString("</tbody>\n</table></div>\n")
	fmt.Fprintf(&out, "<details class=\"unified-diff\">\n<summary>The whole diff, %s → %s</summary>\n", escapeHTML(from), escapeHTML(to))
	out.WriteString(b.hl.highlight(diff.Unified, "diff"))
	out.WriteString("</details>\n</figure>")
	return out.String(), nil
}
