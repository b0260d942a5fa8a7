package stages

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The files of a stage tree: every regular file under the stage directory
// except .git and what the repository's .gitignore files exclude. git is not
// required (the book build compares trees directly), so this reads the
// .gitignore files itself and understands their basic forms:
//
//	*.test        a glob matched against the name at any depth
//	/tmp/         a leading or inner slash anchors the pattern to the
//	book/_site/   directory of the .gitignore; a trailing slash matches
//	              directories only
//
// Negation (!pattern) and ** are not understood; such lines are ignored.
// Symbolic links are skipped.
//
// An exercise's checker (exercise_<n>_test.go, package
// softgpu/tools/internal/exercises) is not part of the tree either: it
// belongs to its chapter's stage alone, so a stage diff neither shows it
// removed in the next stage nor a new stage copies it.

// treeFile is one file of a tree.
type treeFile struct {
	Path string // slash-separated, relative to the stage directory
	Mode fs.FileMode
	Data []byte
}

// exerciseChecker matches an exercise checker's file name.
var exerciseChecker = regexp.MustCompile(`^exercise_[0-9]+_test\.go$`)

// ignorePattern is one .gitignore line.
type ignorePattern struct {
	base    string // slash path of the .gitignore's directory relative to the root ("" for the root)
	glob    string
	anchor  bool // match the path relative to base, not just the name
	dirOnly bool
}

// readIgnore reads the .gitignore in dir (root-relative slash path rel).
func readIgnore(dir, rel string) ([]ignorePattern, error) {
	data, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ignorePattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' || strings.Contains(line, "**") {
			continue
		}
		p := ignorePattern{base: rel}
		if strings.HasSuffix(line, "/") {
			p.dirOnly = true
			line = strings.TrimSuffix(line, "/")
		}
		if strings.Contains(line, "/") {
			p.anchor = true
			line = strings.TrimPrefix(line, "/")
		}
		p.glob = line
		out = append(out, p)
	}
	return out, sc.Err()
}

// ignored reports whether the root-relative slash path rel is excluded.
func ignored(patterns []ignorePattern, rel string, isDir bool) bool {
	for _, p := range patterns {
		if p.dirOnly && !isDir {
			continue
		}
		if p.base != "" && !strings.HasPrefix(rel, p.base+"/") {
			continue // a nested .gitignore covers only its own directory
		}
		target := path.Base(rel)
		if p.anchor {
			target = strings.TrimPrefix(rel, p.base+"/")
		}
		if ok, _ := path.Match(p.glob, target); ok {
			return true
		}
	}
	return false
}

// readTree reads every file of the stage directory dir under root.
func readTree(root, dir string) ([]treeFile, error) {
	patterns, err := readIgnore(root, "")
	if err != nil {
		return nil, err
	}
	stageDir := filepath.Join(root, dir)
	if fi, err := os.Stat(stageDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("stages: %s is not a directory under %s", dir, root)
	}
	var files []treeFile
	err = filepath.WalkDir(stageDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		relStage, _ := filepath.Rel(stageDir, p)
		relStage = filepath.ToSlash(relStage)
		relRoot := path.Join(dir, relStage)
		if d.IsDir() {
			if d.Name() == ".git" || p != stageDir && ignored(patterns, relRoot, true) {
				return filepath.SkipDir
			}
			more, err := readIgnore(p, relRoot)
			if err != nil {
				return err
			}
			patterns = append(patterns, more...)
			return nil
		}
		if !d.Type().IsRegular() || ignored(patterns, relRoot, false) || exerciseChecker.MatchString(d.Name()) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, treeFile{Path: relStage, Mode: info.Mode(), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stages: reading %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// isBinary reports whether data looks like a binary file: a NUL byte in its
// first 8000 bytes, the test git uses.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// gitMode is the mode git would record for a file.
func gitMode(m fs.FileMode) string {
	if m&0o111 != 0 {
		return "100755"
	}
	return "100644"
}
