package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"softgpu/stage9-chardev/server"
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
		assert.Equal(t, 0, stderr.Len(), "softgpu-smi %s wrote %q on stderr", arg, stderr.String())
		if !strings.Contains(stdout.String(), "page-table pool") {
			t.Errorf("softgpu-smi %s does not say the memory total is what is left after the page tables:\n%s", arg, stdout.String())
		}
	}
}

// TestLoopOutlivesTheAttachTimeout: softgpu-smi never attaches, and the
// daemon drops a connection that goes AttachTimeout without attaching or
// calling; with -l longer than that, softgpu-smi dials again and goes on
// reporting.
//
// The timeout also bounds the gaps between the calls of one report, on a
// connection just dialled, so it must be far longer than a goroutine can
// be kept off a core: at 50 ms, a 60 ms stall between two calls of one
// report failed the test (the daemon dropped the redialled connection
// mid-report). 250 ms, and reports 500 ms apart, so that the daemon drops
// the connection in each gap after the first (firstGap, 200 ms).
func TestLoopOutlivesTheAttachTimeout(t *testing.T) {
	s := serve(t, server.Config{AttachTimeout: 250 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := &interruptAfter{reports: 3, cancel: cancel}
	var stderr bytes.Buffer
	if code := run(ctx, []string{"-node", s.Node(), "-json", "-l", "0.5"}, stdout, &stderr); code != 0 {
		t.Fatalf("softgpu-smi -l 0.5 against a daemon that drops an idle control connection after 250ms = exit %d; want 0; stderr:\n%s", code, stderr.String())
	}
	if n := strings.Count(stdout.String(), "\n"); n != 3 {
		t.Errorf("softgpu-smi -l wrote %d reports; want 3:\n%s", n, stdout.String())
	}
}
