package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpExitsZeroOnStdout: -h and -help are a question, not a mistake;
// softgpu-smi answers them as every other command of the project does,
// on stdout with status 0, and says what its memory total counts.
func TestHelpExitsZeroOnStdout(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{arg}, &stdout, &stderr); code != 0 {
			t.Errorf("softgpu-smi %s: exit status %d; want 0 (stderr: %q)", arg, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "-node") {
			t.Errorf("softgpu-smi %s printed %q on stdout; want the usage with its flags", arg, stdout.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("softgpu-smi %s wrote %q on stderr; want nothing", arg, stderr.String())
		}
		if !strings.Contains(stdout.String(), "page-table pool") {
			t.Errorf("softgpu-smi %s does not say the memory total is what is left after the page tables:\n%s", arg, stdout.String())
		}
	}
}
