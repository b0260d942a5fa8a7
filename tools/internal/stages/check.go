package stages

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"softgpu/tools/internal/benchrun"
)

// Check verifies the rules that keep the stages copyable and comparable
// (DESIGN.md §1, §5, §8) and returns one line per violation; none means the
// repository is well formed:
//
//   - every existing stage has a go.mod declaring softgpu/<dir>, and requires
//     or replaces no other softgpu module (a stage copies out alone);
//   - every existing stage's predecessor in build order exists too;
//   - go.work uses every existing stage and tools/;
//   - every benchmark name of a stage exists in its successor, so benchstat
//     lines adjacent stages up row for row. Names are found by building each
//     stage's test binary and running it with -test.benchtime 1x.
//
// progress, if not nil, receives a line per build and run.
func Check(ctx context.Context, root string, progress io.Writer) ([]string, error) {
	if progress == nil {
		progress = io.Discard
	}
	existing := Existing(root)
	var problems []string
	for _, s := range existing {
		problems = append(problems, checkGoMod(root, s.Dir)...)
		if s.Predecessor != "" && !dirExists(filepath.Join(root, s.Predecessor)) {
			problems = append(problems, fmt.Sprintf("%s exists but its predecessor in build order, %s, does not", s.Dir, s.Predecessor))
		}
	}
	problems = append(problems, checkGoWork(root, existing)...)

	names, buildProblems, err := benchmarkNames(ctx, root, existing, progress)
	if err != nil {
		return nil, err
	}
	problems = append(problems, buildProblems...)
	for _, s := range existing {
		pred, ok := names[s.Predecessor]
		succ, ok2 := names[s.Dir]
		if !ok || !ok2 {
			continue
		}
		have := map[string]bool{}
		for _, n := range succ {
			have[n] = true
		}
		for _, n := range pred {
			if !have[n] {
				problems = append(problems, fmt.Sprintf("%s: benchmark %s of its predecessor %s is missing (a name, once introduced, stays)", s.Dir, n, s.Predecessor))
			}
		}
	}
	return problems, nil
}

func checkGoMod(root, dir string) []string {
	p := filepath.Join(root, dir, "go.mod")
	if _, err := os.Stat(p); err != nil {
		return []string{fmt.Sprintf("%s: no go.mod: %v", dir, err)}
	}
	mod, err := readGoMod(p)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", dir, err)}
	}
	var problems []string
	if mod.Module.Path != ModulePath(dir) {
		got := mod.Module.Path
		if got == "" {
			got = "none"
		}
		problems = append(problems, fmt.Sprintf("%s/go.mod: module is %s; want %s", dir, got, ModulePath(dir)))
	}
	for _, r := range mod.Require {
		if strings.HasPrefix(r.Path, ModulePrefix) {
			problems = append(problems, fmt.Sprintf("%s/go.mod: requires %s; a stage may depend on no other module of this repository", dir, r.Path))
		}
	}
	for _, r := range mod.Replace {
		if strings.HasPrefix(r.Old.Path, ModulePrefix) || isDirectoryPath(r.New.Path) {
			problems = append(problems, fmt.Sprintf("%s/go.mod: replaces %s with %s; a stage must build on its own (GOWORK=off)", dir, r.Old.Path, r.New.Path))
		}
	}
	return problems
}

func checkGoWork(root string, existing []Stage) []string {
	p := filepath.Join(root, "go.work")
	if _, err := os.Stat(p); err != nil {
		return []string{fmt.Sprintf("go.work: %v", err)}
	}
	work, err := readGoWork(p)
	if err != nil {
		return []string{fmt.Sprintf("go.work: %v", err)}
	}
	used := map[string]bool{}
	for _, u := range work.Use {
		used[path.Clean(filepath.ToSlash(u.DiskPath))] = true
	}
	var problems []string
	want := Dirs(existing)
	if dirExists(filepath.Join(root, "tools")) {
		want = append(want, "tools")
	}
	for _, dir := range want {
		if !used[dir] {
			problems = append(problems, fmt.Sprintf("go.work: does not use ./%s (run: go work use ./%s)", dir, dir))
		}
	}
	return problems
}

// benchmarkNames builds and runs, once each, every stage that has a
// predecessor or successor to compare with, and returns its benchmark names.
// A stage that fails to build or run is a problem, not an error: the other
// stages are still checked.
func benchmarkNames(ctx context.Context, root string, existing []Stage, progress io.Writer) (map[string][]string, []string, error) {
	exists := map[string]bool{}
	for _, s := range existing {
		exists[s.Dir] = true
	}
	needed := map[string]bool{}
	for _, s := range existing {
		if exists[s.Predecessor] {
			needed[s.Dir], needed[s.Predecessor] = true, true
		}
	}
	tmp, err := os.MkdirTemp("", "softgpu-check-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)

	names := map[string][]string{}
	var problems []string
	for _, s := range existing {
		if !needed[s.Dir] {
			continue
		}
		fmt.Fprintf(progress, "check: %s: build and run every benchmark once\n", s.Dir)
		list, err := listBenchmarks(ctx, filepath.Join(root, s.Dir), tmp)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: cannot list its benchmarks: %v", s.Dir, err))
			continue
		}
		names[s.Dir] = list
	}
	return names, problems, nil
}

// listBenchmarks builds the stage in stageDir and returns the full names of
// its benchmarks, each run once.
func listBenchmarks(ctx context.Context, stageDir, binDir string) ([]string, error) {
	bin, err := benchrun.Build(ctx, stageDir, binDir)
	if err != nil {
		return nil, err
	}
	out, err := bin.Run(ctx, benchrun.Options{Bench: ".", Benchtime: "1x"})
	if err != nil {
		return nil, err
	}
	return out.Names(), nil
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
