// Package exercises finds the book's exercise checkers and their reference
// solutions, and runs each against its stage.
//
// A checker is a test file behind the build tag `exercise`, named
// exercise_<n>_test.go in the package of the stage the exercise changes,
// holding TestExercise<stage>_<n> (stage is the number in the stage's
// directory name: TestExercise5_1 in stage5-vm). A student runs it as
//
//	go test -tags exercise -run Exercise5_1 ./driver
//
// Its reference solution is book/solutions/<stage-dir>/<n>.patch, a git
// diff of the stage directory with paths relative to the stage. The
// solutions sit outside the stages, so a stage never carries an answer
// and a checker is never forwarded (an exercise belongs to its chapter's
// stage).
//
// Run checks one exercise the way the closing note of each checker
// promises: on a fresh copy of the stage the checker FAILS (it compiles,
// runs, and reports TestExercise… failed); with the patch applied it
// PASSES; and with the patch the checker's package passes its normal
// tests (-short) and every package the patch changes passes go vet, so a
// solution cannot break its stage.
//
// Invariants of Find's result, each a problem when broken:
//   - every checker has a solution and every solution a checker;
//   - a checker's first line is //go:build exercise and it declares its
//     TestExercise<stage>_<n>;
//   - exercise numbers are unique within a stage.
package exercises

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"softgpu/tools/internal/stages"
)

// SolutionsDir is where the reference solutions live, relative to the root.
const SolutionsDir = "book/solutions"

// Exercise is one checker and its solution.
type Exercise struct {
	Stage    string // the stage's directory, e.g. stage9-chardev
	N        int    // the exercise's number in its chapter
	Checker  string // slash path of the checker, relative to the stage
	Solution string // slash path of the patch, relative to the root
}

// Pkg returns the checker's package as a go command argument, "./server".
func (e Exercise) Pkg() string {
	if dir := path.Dir(e.Checker); dir != "." {
		return "./" + dir
	}
	return "."
}

// Test returns the checker's test function name, TestExercise9_1.
func (e Exercise) Test() string { return fmt.Sprintf("TestExercise%d_%d", StageNumber(e.Stage), e.N) }

// Name returns the exercise as the book numbers it, "9.1".
func (e Exercise) Name() string { return fmt.Sprintf("%d.%d", StageNumber(e.Stage), e.N) }

// StageNumber returns the number in a stage directory's name: 9 for
// stage9-chardev.
func StageNumber(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(dir, "-", 2)[0], "stage"))
	return n
}

var (
	checkerName  = regexp.MustCompile(`^exercise_([0-9]+)_test\.go$`)
	solutionName = regexp.MustCompile(`^([0-9]+)\.patch$`)
)

// IsChecker reports whether a file name is a checker's.
func IsChecker(name string) bool { return checkerName.MatchString(name) }

// Find returns every exercise of the existing stages under root, in build
// order and then by number, and one line per broken invariant.
func Find(root string) ([]Exercise, []string, error) {
	var out []Exercise
	var problems []string
	for _, s := range stages.Existing(root) {
		checkers := map[int]string{}
		stageDir := filepath.Join(root, s.Dir)
		err := filepath.WalkDir(stageDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != stageDir {
				return filepath.SkipDir
			}
			m := checkerName.FindStringSubmatch(d.Name())
			if d.IsDir() || m == nil {
				return nil
			}
			rel, _ := filepath.Rel(stageDir, p)
			rel = filepath.ToSlash(rel)
			n, _ := strconv.Atoi(m[1])
			if other, dup := checkers[n]; dup {
				problems = append(problems, fmt.Sprintf("%s: exercise %d has two checkers, %s and %s", s.Dir, n, other, rel))
				return nil
			}
			checkers[n] = rel
			problems = append(problems, checkHeader(p, s.Dir, rel, n)...)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		solutions := map[int]string{}
		entries, err := os.ReadDir(filepath.Join(root, SolutionsDir, s.Dir))
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		for _, e := range entries {
			rel := path.Join(SolutionsDir, s.Dir, e.Name())
			m := solutionName.FindStringSubmatch(e.Name())
			if m == nil {
				problems = append(problems, fmt.Sprintf("%s: not a solution's name (want <n>.patch)", rel))
				continue
			}
			n, _ := strconv.Atoi(m[1])
			solutions[n] = rel
		}
		var nums []int
		for n := range checkers {
			nums = append(nums, n)
		}
		for n, sol := range solutions {
			if _, ok := checkers[n]; !ok {
				problems = append(problems, fmt.Sprintf("%s: a solution with no checker (want exercise_%d_test.go in the package it changes)", sol, n))
			}
		}
		sort.Ints(nums)
		for _, n := range nums {
			sol, ok := solutions[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s/%s: a checker with no solution (want %s/%s/%d.patch)", s.Dir, checkers[n], SolutionsDir, s.Dir, n))
				continue
			}
			out = append(out, Exercise{Stage: s.Dir, N: n, Checker: checkers[n], Solution: sol})
		}
	}
	sort.Strings(problems)
	return out, problems, nil
}

// checkHeader returns the problems of checker file p.
func checkHeader(p, stage, rel string, n int) []string {
	data, err := os.ReadFile(p)
	if err != nil {
		return []string{fmt.Sprintf("%s/%s: %v", stage, rel, err)}
	}
	var problems []string
	first, _, _ := strings.Cut(string(data), "\n")
	if strings.TrimSpace(first) != "//go:build exercise" {
		problems = append(problems, fmt.Sprintf("%s/%s: its first line is %q; want //go:build exercise (a checker fails on the untouched stage, so it must stay out of go test)", stage, rel, first))
	}
	test := Exercise{Stage: stage, N: n}.Test()
	if !strings.Contains(string(data), "func "+test+"(t *testing.T)") {
		problems = append(problems, fmt.Sprintf("%s/%s: declares no %s(t *testing.T)", stage, rel, test))
	}
	return problems
}

// Packages returns the packages a patch changes Go files in, as go command
// arguments ("." and "./server"), sorted.
func Packages(patch string) []string {
	seen := map[string]bool{}
	for _, line := range strings.Split(patch, "\n") {
		file, ok := strings.CutPrefix(line, "+++ b/")
		if !ok {
			file, ok = strings.CutPrefix(line, "--- a/")
		}
		if !ok || !strings.HasSuffix(file, ".go") {
			continue
		}
		dir := path.Dir(strings.TrimSpace(file))
		if dir == "." {
			seen["."] = true
		} else {
			seen["./"+dir] = true
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
