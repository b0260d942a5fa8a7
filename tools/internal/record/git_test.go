package record

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctx := context.Background()
	root := t.TempDir()
	if h, c := Head(ctx, root), Commit(ctx, root); h != "" || c != "" {
		t.Errorf("outside a repository: Head %q, Commit %q; want none", h, c)
	}
	if _, known := Changes(ctx, root); known {
		t.Errorf("outside a repository: Changes known")
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %q\n%s", args, out)
		return strings.TrimSpace(string(out))
	}
	write := func(name, data string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(data), 0o644))
	}
	git("init", "-q")
	write(".gitignore", "*.out\n")
	write("a.json", "{}\n")
	git("add", "-A")
	git("-c", "user.email=t@example.com", "-c", "user.name=test", "commit", "-q", "-m", "a")
	head := git("rev-parse", "HEAD")
	write("ignored.out", "x")
	if h, c := Head(ctx, root), Commit(ctx, root); h != head || c != head || len(h) != 40 {
		t.Errorf("clean tree (an ignored file aside): Head %q, Commit %q; want the full hash %s", h, c, head)
	}
	write("a.json", "{\"x\": 1}\n")
	write("new.txt", "x")
	changes, known := Changes(ctx, root)
	if want := []string{"M a.json", "?? new.txt"}; !known || !reflect.DeepEqual(changes, want) {
		t.Errorf("Changes = %q, %v; want %q", changes, known, want)
	}
	if h, c := Head(ctx, root), Commit(ctx, root); h != head || c != head+"+dirty" {
		t.Errorf("dirty tree: Head %q, Commit %q; want %s and %s+dirty", h, c, head, head)
	}
	tracked := Tracked(ctx, filepath.Join(root, "a.json"), filepath.Join(root, "new.txt"), filepath.Join(root, "none.json"), filepath.Join(root, "nodir", "x.json"))
	assert.Equal(t, []string{filepath.Join(root, "a.json")}, tracked, "Tracked")
}
