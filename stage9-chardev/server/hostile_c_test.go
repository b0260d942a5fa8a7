package server_test

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Strangers in C against the real softgpud (issue 32, items 2, 3 and
// 6): examples/c/fill.c, built with the system's C compiler from nothing
// but include/softgpu_uapi.h, run as a process of its own — as nobody
// when the test runs as root — against softgpud run by startDaemon.
//
//	fill          reopens the read-only public and status memfds O_RDWR
//	              through /proc/self/fd and tries a writable mapping and a
//	              write(2) (item 2), then fills its own page and checks it
//	fill -garbage garbage in every ring slot and the doorbell page, then a
//	              doorbell far past the ring (item 3: no word a client
//	              writes is trusted)
//	fill -hang    a DELAY of 2^62 cycles, which softgpud's default watchdog
//	              must stop (item 6)
//	fill -unpopulated  CHANNEL_START before touching the channel's pages,
//	              which softgpud must refuse having allocated none of
//	              them, then holes punched in a started channel's memfds,
//	              which the kernel must refuse (hostile_splicehole_test.go)
//
// Each must end as the C client says (its own bytes right, or its own
// channel faulted), while a well-behaved client's round trips keep their
// bytes and their bound during and after; and SIGTERM stops the daemon
// at the end. examples/c's TestAStrangerInC runs the same binary against
// a daemon in its own process.

// buildFill compiles examples/c/fill.c as its README says into dir, or
// skips the test without a C compiler.
func buildFill(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler: cc is not on PATH, so fill.c cannot be built")
	}
	include, err := filepath.Abs(filepath.Join("..", "include"))
	require.NoError(t, err)
	bin := filepath.Join(dir, "fill")
	cmd := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I"+include, "-o", bin, filepath.Join("..", "examples", "c", "fill.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return bin
}

func TestStrangersInCAgainstSoftgpud(t *testing.T) {
	bin := buildFill(t, strangerDir(t)) // a directory nobody may enter, to run it from
	cred, _ := strangerCred()
	d := startDaemon(t) // softgpud's defaults, its watchdog among them
	w := dialWellBehaved(t, d.node)
	trips := byte(0)
	for _, tc := range []struct {
		mode string
		says string // fill's first line
		ends string // the prefix of its last
	}{
		{"", "ok: 4096 bytes filled by the device", ""},
		{"-garbage", "garbage", "ok: the daemon faulted the channel"},
		{"-hang", "hanging", "ok: the daemon stopped the DELAY"},
		{"-unpopulated", "unpopulated", "ok: the daemon refused to start the channel"},
	} {
		name := "fill " + tc.mode
		t.Run(name, func(t *testing.T) {
			trips++
			w.roundTrip(t, "before "+name, trips)
			// fill gives up on the device after 10 s; 30 s bounds one that
			// hangs before it gets that far.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := []string{d.node}
			if tc.mode != "" {
				args = []string{tc.mode, d.node}
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			if cred != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
				cmd.Dir = filepath.Dir(bin)
			}
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			lines := bufio.NewScanner(out)
			if !lines.Scan() || lines.Text() != tc.says {
				cmd.Wait()
				t.Fatalf("%s said %q, not %q\nstderr:\n%s", name, lines.Text(), tc.says, errOut.String())
			}
			rest := make(chan string, 1)
			go func() {
				var b strings.Builder
				for lines.Scan() {
					b.WriteString(lines.Text() + "\n")
				}
				rest <- b.String()
			}()
			var said string
			for ended := false; !ended; {
				select {
				case said = <-rest: // its stdout closed: it has exited
					ended = true
				default:
					trips++
					w.roundTrip(t, "while "+name+" runs", trips)
				}
			}
			if err := cmd.Wait(); err != nil || !strings.HasPrefix(said, tc.ends) {
				t.Errorf("%s: %v, then stdout %q; want exit 0 and %q\nstderr:\n%s", name, err, said, tc.ends+"...", errOut.String())
			}
			t.Logf("%s: %s %s", name, tc.says, strings.TrimSpace(said))
			trips++
			w.roundTrip(t, "after "+name, trips)
			d.live(t, "after "+name)
		})
	}
	d.stop(t)
}
