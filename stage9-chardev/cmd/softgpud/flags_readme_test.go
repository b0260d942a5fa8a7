package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTheReadmeNamesEveryFlag: every flag `softgpud -h` lists is named in
// the stage's README (as `-name`), so that the flags that keep one
// stranger from harming the rest, and the quotas, cannot be added or
// renamed without the README following.
func TestTheReadmeNamesEveryFlag(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "softgpud")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// -h prints the usage on stderr and exits 0.
	usage, err := exec.Command(bin, "-h").CombinedOutput()
	require.NoError(t, err, "softgpud -h:\n%s", usage)
	flags := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(usage), -1)
	require.NotEmpty(t, flags, "softgpud -h lists no flag:\n%s", usage)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	for _, f := range flags {
		// In a code span: `-name`, `-name VALUE` or `softgpud -name ...`.
		named := regexp.MustCompile("`(softgpud )?-" + regexp.QuoteMeta(f[1]) + "[`\\s]")
		if !named.Match(readme) {
			t.Errorf("softgpud -h lists -%s; the README never names it in a code span (`-%s`)", f[1], f[1])
		}
	}
}
