package benchrun

import (
	"context"
	"fmt"
	"path/filepath"

	"softgpu/tools/internal/benchfmt"
)

// Set is the built binaries of several stages, by stage directory name.
type Set map[string]*Binary

// BuildAll builds every stage under root into binDir, once each, reporting
// each build with progress (nil for quiet), a Printf-like function.
func BuildAll(ctx context.Context, root string, stages []string, binDir string, progress func(format string, a ...any)) (Set, error) {
	set := Set{}
	for _, stage := range stages {
		if progress != nil {
			progress("building %s (go test -c)", stage)
		}
		bin, err := Build(ctx, filepath.Join(root, stage), binDir)
		if err != nil {
			return nil, err
		}
		set[stage] = bin
	}
	return set, nil
}

// Bench runs the benchmarks o selects in stage's binary.
func (s Set) Bench(ctx context.Context, stage string, o Options) (*benchfmt.Output, error) {
	bin, ok := s[stage]
	if !ok {
		return nil, fmt.Errorf("benchrun: stage %s was not built", stage)
	}
	return bin.Run(ctx, o)
}
