package stages

import (
	"context"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"softgpu/tools/internal/fixture"
)

func TestSelect(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	tests := []struct {
		name     string
		list     string
		want     []string
		wantText string // the error's text, in full
	}{
		{"every existing stage", "", []string{"stage0-mailbox", "stage1-ring"}, ""},
		{"build order kept", "stage1-ring, stage0-mailbox/", []string{"stage0-mailbox", "stage1-ring"}, ""},
		{"empty names skipped", "stage1-ring,,", []string{"stage1-ring"}, ""},
		{"names no stage", ",,", nil, `",," names no stage; existing stages: stage0-mailbox, stage1-ring`},
		{"unknown", "stage0-mailbox,stage9-nope", nil, `unknown stage "stage9-nope"; stages are: stage0-mailbox, stage1-ring, stage2-fence, stage3-pinned, stage4-nolock, stage7-idle, stage5-vm, stage6-runlist, stage8-managed, stage9-chardev`},
		{"missing", "stage2-fence", nil, "stage stage2-fence does not exist under " + root + " yet; existing stages: stage0-mailbox, stage1-ring"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(root, tt.list)
			if tt.wantText != "" {
				if !errors.Is(err, ErrName) || err.Error() != tt.wantText {
					t.Errorf("Select(%q) error = %v; want ErrName %q", tt.list, err, tt.wantText)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(Dirs(got), tt.want) {
				t.Errorf("Select(%q) = %q, %v; want %q", tt.list, Dirs(got), err, tt.want)
			}
		})
	}
}

func TestUntracked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := fixture.CopyTree(t, "testdata/tree")
	ctx := context.Background()
	if files, err := Untracked(ctx, root, "stage0-mailbox"); err != nil || files != nil {
		t.Errorf("Untracked outside a git work tree = %q, %v; want none", files, err)
	}
	runGit(t, root, "init", "-q")
	runGit(t, root, "add", "-A")
	runGit(t, root, "-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "tree")
	writeFile(t, root, "stage0-mailbox/s0.txt", "benchmark output")
	writeFile(t, root, "stage0-mailbox/cpu.prof/x", "a directory of stray files")
	writeFile(t, root, "stage0-mailbox/softgpu.test", "ignored by the tree's .gitignore")
	writeFile(t, root, "stage1-ring/notes.md", "stray")
	writeFile(t, root, "elsewhere.txt", "outside every stage")
	tests := []struct {
		dirs []string
		want []string
	}{
		{[]string{"stage0-mailbox"}, []string{"stage0-mailbox/cpu.prof/x", "stage0-mailbox/s0.txt"}},
		{[]string{"stage0-mailbox", "stage1-ring"}, []string{"stage0-mailbox/cpu.prof/x", "stage0-mailbox/s0.txt", "stage1-ring/notes.md"}},
	}
	for _, tt := range tests {
		files, err := Untracked(ctx, root, tt.dirs...)
		if err != nil || !reflect.DeepEqual(files, tt.want) {
			t.Errorf("Untracked(%q) = %q, %v; want %q", tt.dirs, files, err, tt.want)
		}
	}
	err := CheckTracked(ctx, root, "stage1-ring")
	if err == nil || !strings.HasPrefix(err.Error(), "untracked file stage1-ring/notes.md: not part of any stage") {
		t.Errorf("CheckTracked(stage1-ring) = %v; want an error naming stage1-ring/notes.md", err)
	}
	many := &UntrackedError{Files: []string{"a", "b", "c", "d", "e", "f", "g"}}
	if got := many.Error(); !strings.HasPrefix(got, "untracked files a, b, c, d, e and 2 more: ") {
		t.Errorf("UntrackedError with 7 files = %q; want the first five and a count", got)
	}
}

// TestLookupTrailingSlash checks a stage named with one trailing slash, as
// a shell's completion writes it, is the stage, as Select takes it.
func TestLookupTrailingSlash(t *testing.T) {
	root := fixture.CopyTree(t, "testdata/tree")
	if s, ok := Lookup("stage1-ring/"); !ok || s.Dir != "stage1-ring" {
		t.Errorf("Lookup(stage1-ring/) = %+v, %v; want stage1-ring, true", s, ok)
	}
	if err := CheckKnown("stage1-ring/"); err != nil {
		t.Errorf("CheckKnown(stage1-ring/) = %v; want nil", err)
	}
	if err := CheckExists(root, "stage1-ring/"); err != nil {
		t.Errorf("CheckExists(stage1-ring/) = %v; want nil", err)
	}
	if _, ok := Lookup("stage1-ring//"); ok {
		t.Errorf("Lookup(stage1-ring//) found a stage; want only one slash trimmed")
	}
	if got := Clean("stage1-ring/"); got != "stage1-ring" {
		t.Errorf("Clean(stage1-ring/) = %q; want stage1-ring", got)
	}
}
