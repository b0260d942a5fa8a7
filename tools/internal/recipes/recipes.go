// Package recipes finds the shell recipes the READMEs promise work, so that
// a test can run each one exactly as a reader would paste it.
//
// A recipe is a fenced code block in a README whose opening fence is
// ```sh and whose line above it (blank lines between are allowed) is a
// marker comment, invisible on GitHub and in the book:
//
//	<!-- recipe -->          run in the README's own directory
//	<!-- recipe: DIR -->     run in DIR, relative to the README's directory
//
// Only marked blocks are recipes: a block that starts a daemon for a human
// to watch, or runs for an hour, stays a plain block. Blocks of one README
// run in the order they appear, so a later block may use what an earlier
// one made (a copy, a file in /tmp).
//
// Invariants of what Parse returns: every recipe has a non-empty script;
// its Line is the 1-based line of its opening fence in File; Dir is
// cleaned and relative to the repository root, never escaping it.
package recipes

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Recipe is one marked block.
type Recipe struct {
	File   string // the README, relative to the repository root, slash-separated
	Line   int    // the line of the opening fence
	Dir    string // where it runs, relative to the repository root ("." for the root)
	Script string // the block's lines, as written
}

// Name is how reports name a recipe: "stage0-mailbox/README.md:221".
func (r Recipe) Name() string { return fmt.Sprintf("%s:%d", r.File, r.Line) }

// marker matches a recipe marker; its group is the optional directory.
var marker = regexp.MustCompile(`^<!--\s*recipe(?::\s*(\S+))?\s*-->\s*$`)

// Parse returns the recipes of one README. file is its path relative to
// the repository root (slash-separated); it decides where the recipes run.
// A marker that is not followed by a ```sh block, a block that never
// closes, an empty block and a directory that leaves the repository are
// errors: a marker is a promise, and a broken one should fail loudly.
func Parse(file string, text string) ([]Recipe, error) {
	var (
		out     []Recipe
		pending = -1 // the line of a marker still waiting for its block
		dir     string
		inBlock bool
		block   Recipe
		lines   []string
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inBlock {
			if strings.TrimSpace(line) == "```" {
				inBlock = false
				block.Script = strings.Join(lines, "\n") + "\n"
				if strings.TrimSpace(block.Script) == "" {
					return nil, fmt.Errorf("%s:%d: the recipe's block is empty", file, block.Line)
				}
				out = append(out, block)
			} else {
				lines = append(lines, line)
			}
			continue
		}
		if m := marker.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if pending >= 0 {
				return nil, fmt.Errorf("%s:%d: a recipe marker with no ```sh block after it", file, pending)
			}
			pending, dir = n, m[1]
			continue
		}
		if pending < 0 {
			continue
		}
		switch trimmed := strings.TrimSpace(line); {
		case trimmed == "":
			continue // blank lines may stand between the marker and its block
		case trimmed == "```sh":
			d, err := resolve(file, dir)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, pending, err)
			}
			inBlock, block, lines = true, Recipe{File: file, Line: n, Dir: d}, nil
			pending = -1
		default:
			return nil, fmt.Errorf("%s:%d: a recipe marker must be followed by a ```sh block, not %q", file, pending, trimmed)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if inBlock {
		return nil, fmt.Errorf("%s:%d: the recipe's block never closes", file, block.Line)
	}
	if pending >= 0 {
		return nil, fmt.Errorf("%s:%d: a recipe marker with no ```sh block after it", file, pending)
	}
	return out, nil
}

// resolve turns a marker's directory, relative to the README's, into one
// relative to the repository root.
func resolve(file, dir string) (string, error) {
	d := path.Clean(path.Join(path.Dir(file), dir))
	if d == ".." || strings.HasPrefix(d, "../") || path.IsAbs(dir) {
		return "", fmt.Errorf("recipe directory %q is outside the repository", dir)
	}
	return d, nil
}

// Find returns the recipes of every README.md under root, in path order
// and, within a README, in the order they appear. Test data (any path with
// a testdata component), the book's sources and hidden directories are not
// searched.
func Find(root string) ([]Recipe, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || name == "book" || name == "_site") {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "README.md" {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var all []Recipe
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		rs, err := Parse(f, string(text))
		if err != nil {
			return nil, err
		}
		all = append(all, rs...)
	}
	return all, nil
}
