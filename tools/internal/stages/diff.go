package stages

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// DiffStages compares two stage trees file by file, after replacing each
// stage's own module path with Placeholder, so the diff shows only the
// mechanism one stage added to the other. It reads the trees directly and
// needs no git and no diff binary.
//
// Unified is a patch from A to B with paths relative to the stage directory
// (a/driver/ring.go, b/driver/ring.go), files in path order: applied inside
// a copy of A (git apply, or patch -p1) and renamed back from Placeholder,
// it gives B.

// FileDiff is one file that differs between the two trees.
type FileDiff struct {
	Path           string // slash-separated, relative to the stage directory
	Status         string // "added", "removed" or "modified"
	Added, Removed int    // lines; 0 for a binary file
	Binary         bool
}

// Diff is the normalised difference between two stages.
type Diff struct {
	A, B    string // stage directories, A the base
	Files   []FileDiff
	Unified string
}

// DiffStages returns the normalised diff from stage a to stage b, both
// directories under root.
func DiffStages(root, a, b string) (*Diff, error) {
	return DiffPaths(root, a, b, nil)
}

// DiffPaths is DiffStages limited to the files under paths: each a file or
// a directory relative to the stage ("driver", "driver/ring.go",
// "README.md"), matched whole element by whole element, as git matches a
// pathspec. No paths means every file. A path that names no file of either
// stage is an ErrPath error, so a typo does not pass for "no change".
func DiffPaths(root, a, b string, paths []string) (*Diff, error) {
	filesA, err := readTree(root, a)
	if err != nil {
		return nil, err
	}
	filesB, err := readTree(root, b)
	if err != nil {
		return nil, err
	}
	if len(paths) > 0 {
		clean := make([]string, len(paths))
		for i, p := range paths {
			clean[i] = cleanPath(p)
		}
		for i, p := range clean {
			if !slices.ContainsFunc(filesA, func(f treeFile) bool { return under(f.Path, p) }) &&
				!slices.ContainsFunc(filesB, func(f treeFile) bool { return under(f.Path, p) }) {
				return nil, &inputError{kind: ErrPath, msg: fmt.Sprintf("path %q matches no file of %s or %s", paths[i], a, b)}
			}
		}
		outside := func(f treeFile) bool {
			return !slices.ContainsFunc(clean, func(p string) bool { return under(f.Path, p) })
		}
		filesA = slices.DeleteFunc(filesA, outside)
		filesB = slices.DeleteFunc(filesB, outside)
	}
	d := &Diff{A: a, B: b}
	var out strings.Builder
	i, j := 0, 0
	for i < len(filesA) || j < len(filesB) {
		var fa, fb *treeFile
		switch {
		case j == len(filesB) || i < len(filesA) && filesA[i].Path < filesB[j].Path:
			fa = &filesA[i]
			i++
		case i == len(filesA) || filesB[j].Path < filesA[i].Path:
			fb = &filesB[j]
			j++
		default:
			fa, fb = &filesA[i], &filesB[j]
			i, j = i+1, j+1
		}
		if fd, ok := diffFile(&out, fa, a, fb, b); ok {
			d.Files = append(d.Files, fd)
		}
	}
	d.Unified = out.String()
	return d, nil
}

// diffFile writes the diff of one file, present in A (fa), B (fb) or both,
// and reports whether the normalised contents or modes differ.
func diffFile(out *strings.Builder, fa *treeFile, dirA string, fb *treeFile, dirB string) (FileDiff, bool) {
	var textA, textB string
	var fd FileDiff
	switch {
	case fb == nil:
		fd = FileDiff{Path: fa.Path, Status: "removed"}
	case fa == nil:
		fd = FileDiff{Path: fb.Path, Status: "added"}
	default:
		fd = FileDiff{Path: fa.Path, Status: "modified"}
	}
	if fa != nil {
		fd.Binary = isBinary(fa.Data)
		textA = Normalise(string(fa.Data), dirA)
	}
	if fb != nil {
		fd.Binary = fd.Binary || isBinary(fb.Data)
		textB = Normalise(string(fb.Data), dirB)
	}
	sameMode := fa == nil || fb == nil || gitMode(fa.Mode) == gitMode(fb.Mode)
	if fa != nil && fb != nil && textA == textB && sameMode {
		return FileDiff{}, false
	}

	fmt.Fprintf(out, "diff --git a/%s b/%s\n", fd.Path, fd.Path)
	nameA, nameB := "a/"+fd.Path, "b/"+fd.Path
	switch {
	case fa == nil:
		fmt.Fprintf(out, "new file mode %s\n", gitMode(fb.Mode))
		nameA = "/dev/null"
	case fb == nil:
		fmt.Fprintf(out, "deleted file mode %s\n", gitMode(fa.Mode))
		nameB = "/dev/null"
	case !sameMode:
		fmt.Fprintf(out, "old mode %s\nnew mode %s\n", gitMode(fa.Mode), gitMode(fb.Mode))
	}
	if textA == textB {
		return fd, true // a mode change, or an empty file added or removed
	}
	if fd.Binary {
		fmt.Fprintf(out, "Binary files %s and %s differ\n", nameA, nameB)
		return fd, true
	}
	linesA, linesB := splitLines(textA), splitLines(textB)
	script := diffLines(linesA, linesB)
	fd.Added, fd.Removed = countChanges(script)
	fmt.Fprintf(out, "--- %s\n+++ %s\n", nameA, nameB)
	writeHunks(out, linesA, linesB, script)
	return fd, true
}

// cleanPath turns a path as a user typed it ("./driver/", "driver//x")
// into the slash form tree paths use; "." stays ".", meaning everything.
func cleanPath(p string) string {
	return path.Clean(filepath.ToSlash(p))
}

// under reports whether the tree path file is dir itself or lies under it.
func under(file, dir string) bool {
	return dir == "." || file == dir || strings.HasPrefix(file, dir+"/")
}

// Stat summarises the diff as `git diff --stat` does: one line per file
// with its count of changed lines and a bar of + and -, then totals.
func (d *Diff) Stat() string {
	const maxBar = 50
	nameWidth, maxChanged, added, removed := 0, 0, 0, 0
	for _, f := range d.Files {
		nameWidth = max(nameWidth, len(f.Path))
		maxChanged = max(maxChanged, f.Added+f.Removed)
		added += f.Added
		removed += f.Removed
	}
	countWidth := max(len(fmt.Sprint(maxChanged)), 3)
	var b strings.Builder
	for _, f := range d.Files {
		if f.Binary {
			fmt.Fprintf(&b, " %-*s | %*s\n", nameWidth, f.Path, countWidth, "Bin")
			continue
		}
		plus, minus := f.Added, f.Removed
		if maxChanged > maxBar {
			plus, minus = scaleBar(f.Added, maxChanged, maxBar), scaleBar(f.Removed, maxChanged, maxBar)
		}
		bar := strings.Repeat("+", plus) + strings.Repeat("-", minus)
		fmt.Fprintf(&b, " %-*s | %*d %s\n", nameWidth, f.Path, countWidth, f.Added+f.Removed, bar)
	}
	fmt.Fprintf(&b, " %d %s changed", len(d.Files), plural(len(d.Files), "file", "files"))
	if added > 0 {
		fmt.Fprintf(&b, ", %d %s(+)", added, plural(added, "insertion", "insertions"))
	}
	if removed > 0 {
		fmt.Fprintf(&b, ", %d %s(-)", removed, plural(removed, "deletion", "deletions"))
	}
	b.WriteByte('\n')
	return b.String()
}

// scaleBar scales n of total to a bar of at most width characters, keeping
// any non-zero count visible.
func scaleBar(n, total, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/total)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
