package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

// Item 8 of the threat model: the daemon keeps serving through resource
// exhaustion. A stranger's connections cost the daemon a descriptor and
// a goroutine each, so they are capped per uid, and one that never
// attaches is dropped; when descriptors run out anyway, accept's EMFILE
// is a reason to wait, not to stop serving.

// hostileEnv names the role a re-executed test binary plays for these
// tests (a role of its own, read in init, before TestMain); its
// arguments follow it: the node, a count.
const hostileEnv = "SOFTGPU_HOSTILE_ROLE"

func init() {
	role := os.Getenv(hostileEnv)
	if role == "" {
		return
	}
	args := strings.Split(role, ",")
	switch args[0] {
	case "conns":
		n, _ := strconv.Atoi(args[2])
		os.Exit(report(holdConns(args[1], n)))
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", hostileEnv, role)
	os.Exit(2)
}

// holdConns is the "conns" role: it opens n connections to node, makes
// VERSION on each, prints how many were served ("served K"), and holds
// them all until it is killed.
func holdConns(node string, n int) error {
	var conns []*net.UnixConn
	served := 0
	for range n {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: node, Net: "unixpacket"})
		if err != nil {
			continue
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(300 * time.Millisecond)) // one the daemon cannot accept yet waits no longer
		if _, err := c.Write(uapi.EncodeCall(1, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})); err != nil {
			continue
		}
		buf := make([]byte, uapi.MaxMessage)
		m, err := c.Read(buf)
		if err != nil || m < uapi.HeaderSize {
			continue
		}
		if h := uapi.DecodeHeader(buf[:m]); h.Errno == uapi.OK {
			served++
		}
	}
	fmt.Printf("served %d\n", served)
	select {}
}

// startHostile runs the test binary as a hostile role, as uid if it is
// not the test's own (root only), and returns it and its stdout's lines.
func startHostile(t *testing.T, uid int, role ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	bin := os.Args[0]
	if uid != os.Getuid() {
		if os.Getuid() != 0 {
			t.Skip("running a process as another uid needs root")
		}
		bin = copyForStranger(t, bin)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), hostileEnv+"="+strings.Join(role, ","))
	if uid != os.Getuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// copyForStranger copies the test binary where another uid may run it:
// the go command builds it in a directory only this uid may enter.
func copyForStranger(t *testing.T, bin string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	require.NoError(t, os.Chmod(dir, 0o711))
	copied := filepath.Join(dir, "hostile.test")
	require.NoError(t, os.WriteFile(copied, b, 0o755))
	return copied
}

// openToOthers lets other uids reach and connect to the daemon's node,
// as -mode 0666 on a shared machine does.
func openToOthers(t *testing.T, d *daemonProc) {
	t.Helper()
	for dir := filepath.Dir(d.node); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		require.NoError(t, os.Chmod(dir, 0o711))
	}
}

func TestConnectionsPerUidAreCapped(t *testing.T) {
	d := startDaemon(t, "-mode", "0666", "-max-conns-per-uid", "8")
	openToOthers(t, d)
	_, lines := startHostile(t, strangerUID, "conns", d.node, "200")
	if !lines.Scan() {
		t.Fatalf("the hostile process printed nothing")
	}
	var served int
	if _, err := fmt.Sscanf(lines.Text(), "served %d", &served); err != nil {
		t.Fatalf("the hostile process printed %q", lines.Text())
	}
	if served > 8 {
		t.Errorf("one uid holds %d served connections; want at most the cap, 8", served)
	}
	d.stillServes(t, "while another uid holds its connections")
	d.terminate(t, patience)
}

func TestAConnectionThatNeverAttachesIsDropped(t *testing.T) {
	d := startDaemon(t, "-attach-timeout", "300ms")
	silent, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: d.node, Net: "unixpacket"})
	require.NoError(t, err)
	defer silent.Close()
	r := dialRaw(t, d.node)
	r.negotiate() // VERSION, then nothing
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(patience))
	if _, err := silent.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection that said nothing: read %v after %v; want it closed by the daemon", err, time.Since(start))
	}
	r.sock.SetReadDeadline(time.Now().Add(patience))
	if _, err := r.sock.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection that made VERSION and no more: read %v after %v; want it closed by the daemon", err, time.Since(start))
	}
	d.stillServes(t, "after dropping them")
	d.terminate(t, patience)
}

func TestAcceptThroughDescriptorExhaustion(t *testing.T) {
	d := startDaemon(t, "-max-conns-per-uid", "100000")
	// The daemon may have 64 descriptors: the stranger's connections
	// take the rest, and accept fails with EMFILE.
	lim := unix.Rlimit{Cur: 64, Max: 64}
	if err := unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Skipf("prlimit on the daemon: %v", err)
	}
	hog, lines := startHostile(t, os.Getuid(), "conns", d.node, "80")
	if !lines.Scan() {
		t.Fatalf("the hostile process printed nothing")
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		t.Fatalf("softgpud exited when accept ran out of descriptors: %v\n%s", err, d.log())
	case <-time.After(200 * time.Millisecond):
	}
	hog.Process.Kill()
	hog.Wait()
	d.stillServes(t, "after the descriptors came back")
	if n := strings.Count(d.log(), "backing off"); n != 1 {
		t.Errorf("the daemon logged %d back-offs for one burst of EMFILE; want 1\n%s", n, d.log())
	}
	d.terminate(t, patience)
}
