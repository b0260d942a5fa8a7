package numbers

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"softgpu/tools/internal/records"
	"softgpu/tools/internal/stages"
)

// Files returns the READMEs whose tables this package keeps, relative to
// root: the repository's own and every existing stage's.
func Files(root string) []string {
	out := []string{"README.md"}
	for _, s := range stages.Existing(root) {
		out = append(out, filepath.Join(s.Dir, "README.md"))
	}
	return out
}

// Sync brings every README's tables to the records in root's
// book/records. With write false it changes nothing and only reports.
// It returns the READMEs whose text differs from what the records give
// (rewritten, if write), and an error for a README it cannot read or
// whose spec names what no record has. A stage README with a "Numbers"
// section must take its figures from a block: a table typed by hand is
// what this package exists to prevent.
func Sync(root string, write bool) (stale []string, err error) {
	recs, err := records.LoadDir(filepath.Join(root, "book", "records"))
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, rel := range Files(root) {
		path := filepath.Join(root, rel)
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		text := string(data)
		blocks, err := Parse(text)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		if rel != "README.md" && len(blocks) == 0 && hasNumbersSection(text) {
			problems = append(problems, fmt.Sprintf("%s: its Numbers section has no numbers block: name the rows in one (go doc softgpu/tools/internal/numbers) rather than typing figures", rel))
			continue
		}
		want, err := Update(text, recs)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			continue
		}
		if want == text {
			continue
		}
		stale = append(stale, rel)
		if write {
			if err := records.WriteFileAtomic(path, []byte(want)); err != nil {
				return stale, err
			}
		}
	}
	if len(problems) > 0 {
		return stale, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return stale, nil
}

// hasNumbersSection reports whether a README has a "## Numbers" heading.
func hasNumbersSection(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "## Numbers" {
			return true
		}
	}
	return false
}
