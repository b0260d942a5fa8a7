package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	fixture := filepath.Join("..", "..", "internal", "book", "testdata", "repo")
	tests := []struct {
		name    string
		args    func(out string) []string
		wantErr string // "" for success
	}{
		{"builds the fixture", func(out string) []string {
			return []string{"-root", fixture, "-book", filepath.Join(fixture, "book"), "-o", out}
		}, ""},
		{"no SUMMARY.md", func(out string) []string {
			return []string{"-root", fixture, "-book", t.TempDir(), "-o", out}
		}, "SUMMARY.md: no such file"},
		{"stray argument", func(out string) []string {
			return []string{"-o", out, "extra"}
		}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "site")
			var stdout, stderr bytes.Buffer
			err := run(tt.args(out), &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run = %v; want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			index := filepath.Join(out, "index.html")
			if got := strings.TrimSpace(stdout.String()); got != index {
				t.Errorf("run printed %q; want the index path %q", got, index)
			}
			if _, err := os.Stat(index); err != nil {
				t.Errorf("no index.html: %v", err)
			}
		})
	}
}
