package main

import (
	"context"
	"os"
	"path/filepath"
	"softgpu/tools/internal/cli"
	"strings"
	"testing"

	"softgpu/tools/internal/fixture"
	"softgpu/tools/internal/records"
)

func TestRunUsage(t *testing.T) {
	root := fixture.Repo(t, "stage0-mailbox")
	t.Chdir(root)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantText string
	}{
		{"no name", []string{}, cli.ExitUsage, "-name is required"},
		{"name with directory", []string{"-name", "a/b"}, cli.ExitUsage, "plain file name"},
		{"unknown stage", []string{"-name", "x", "-stages", "stage42"}, cli.ExitUsage, "stages are: stage0-mailbox, stage1-ring"},
		{"missing stage", []string{"-name", "x", "-stages", "stage1-ring"}, cli.ExitUsage, "existing stages: stage0-mailbox"},
		{"bad env", []string{"-name", "x", "-env", "NOVALUE"}, cli.ExitUsage, "KEY=VALUE"},
		{"zero passes", []string{"-name", "x", "-passes", "0"}, cli.ExitUsage, "-passes 0"},
		{"unknown flag", []string{"-name", "x", "-fast"}, cli.ExitUsage, "flag provided but not defined"},
		{"help", []string{"-h"}, cli.ExitOK, "usage: go run ./tools/cmd/record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			if code := run(context.Background(), tt.args, &stderr); code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantText) {
				t.Errorf("record %q = exit %d, %q; want exit %d and %q", tt.args, code, stderr.String(), tt.wantCode, tt.wantText)
			}
		})
	}
}

// TestRunFixture records two fixture stages for real, quickly. The canary
// threshold is 1e9 (a billion times the best canary): on a loaded machine a
// canary can be thousands of times its best, and this test is about what the
// record holds, not about gating, which has its own synthetic tests.
func TestRunFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fixture stages")
	}
	root := fixture.Repo(t, "stage0-mailbox", "stage1-ring")
	t.Chdir(root)
	out := t.TempDir()
	args := []string{"-passes", "2", "-benchtime", "20x", "-canary-benchtime", "20x", "-canary-count", "2",
		"-threshold", "1e9", "-env", "FIXTURE=1", "-name", "smoke", "-out", out}
	var stderr strings.Builder
	if code := run(context.Background(), args, &stderr); code != cli.ExitOK {
		t.Fatalf("record %q = exit %d:\n%s", args, code, stderr.String())
	}
	rec, err := records.Load(filepath.Join(out, "smoke.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rec.Canary); got != 2 {
		t.Errorf("record has %d canaries; want 2", got)
	}
	if rec.Command != "go run ./tools/cmd/record "+strings.Join(args, " ") {
		t.Errorf("record command = %q", rec.Command)
	}
	if len(rec.Settings.Env) != 1 || rec.Settings.Env[0] != "FIXTURE=1" {
		t.Errorf("record env = %q; want [FIXTURE=1]", rec.Settings.Env)
	}
	for _, want := range []struct{ stage, name, unit string }{
		{"stage0-mailbox", "Fill/size=64B", "cores"},
		{"stage1-ring", "FillStream/size=64B/depth=4", "doorbells/op"},
		{"stage1-ring", "Baseline/memmove/size=4KiB", "B/s"},
		{"stage0-mailbox", "Baseline/pingpong", "ns/op"},
	} {
		row, ok := rec.Find(want.stage, want.name)
		if !ok {
			t.Errorf("record has no row %s %s", want.stage, want.name)
			continue
		}
		if m, ok := row.Metric(want.unit); !ok || len(m.Values) != 2 {
			t.Errorf("row %s %s metric %s = %+v, %v; want 2 values", want.stage, want.name, want.unit, m, ok)
		}
	}
	text, err := os.ReadFile(filepath.Join(out, "smoke.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text), "pkg:") || strings.Count(string(text), "stage: stage1-ring") != 2 {
		t.Errorf("smoke.txt should carry two stage: stage1-ring labels and no pkg:\n%s", text)
	}
}
