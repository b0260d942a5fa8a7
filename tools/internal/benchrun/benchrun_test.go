package benchrun

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/tools/internal/fixture"
)

func TestBuildAndRun(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	bin, err := Build(context.Background(), filepath.Join(root, "stage0-mailbox"), t.TempDir())
	require.NoError(t, err)
	tests := []struct {
		name      string
		opts      Options
		wantNames []string
		wantN     int
		wantErr   error
	}{
		{
			name:      "all",
			opts:      Options{Bench: ".", Benchtime: "10x"},
			wantNames: []string{"Baseline/pingpong", "Baseline/memmove/size=4KiB", "Fill/size=64B"},
			wantN:     3,
		},
		{
			name:      "canary, counted",
			opts:      Options{Bench: "^BenchmarkBaseline$/^pingpong$", Benchtime: "10x", Count: 3},
			wantNames: []string{"Baseline/pingpong"},
			wantN:     3,
		},
		{
			name:    "nothing matches",
			opts:    Options{Bench: "^BenchmarkNope$", Benchtime: "1x"},
			wantErr: ErrNoResults,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := bin.Run(context.Background(), tt.opts)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr, "Run(%v) error", tt.opts.Args())
				return
			}
			require.NoError(t, err, "Run(%v)", tt.opts.Args())
			assert.Equal(t, tt.wantNames, out.Names(), "Run(%v) names", tt.opts.Args())
			if got := len(out.Results()); got != tt.wantN {
				t.Errorf("Run(%v) gave %d results; want %d", tt.opts.Args(), got, tt.wantN)
			}
			if pkg, _ := out.Config("pkg"); pkg != "softgpu/stage0-mailbox" {
				t.Errorf("Run(%v) pkg = %q; want softgpu/stage0-mailbox", tt.opts.Args(), pkg)
			}
		})
	}
}

func TestRunCancelled(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	bin, err := Build(context.Background(), filepath.Join(root, "stage0-mailbox"), t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = bin.Run(ctx, Options{Bench: ".", Benchtime: "1x"})
	assert.ErrorIs(t, err, context.Canceled, "Run(cancelled) error")
}

func TestBuildError(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	_, err := Build(context.Background(), filepath.Join(root, "stage9-chardev"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "stage9-chardev") {
		t.Errorf("Build(missing stage) error = %v; want one naming stage9-chardev", err)
	}
}
