package main

import (
	"context"
	"strings"
	"testing"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/fixture"
)

// TestRunNoMatch checks a -run that selects no exercise fails, as recipes
// does, rather than passing with nothing run.
func TestRunNoMatch(t *testing.T) {
	t.Chdir(fixture.Repo(t, "stage0-mailbox"))
	for _, args := range [][]string{{"-run", "nomatch"}, {"-list", "-run", "nomatch"}} {
		var stdout, stderr strings.Builder
		code := run(context.Background(), args, &stdout, &stderr)
		want := `exercises: no exercise matches -run "nomatch" (0 exercises in all)` + "\n"
		if code != cli.ExitFailed || stderr.String() != want {
			t.Errorf("exercises %q = exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout.String(), stderr.String(), want)
		}
	}
}
