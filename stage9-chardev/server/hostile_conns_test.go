package server_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

// Item 8 of the threat model: the daemon keeps serving through resource
// exhaustion. A stranger's connections cost the daemon a descriptor and
// a goroutine each, so they are capped per uid, and one that never
// attaches is dropped; when descriptors run out anyway, accept's EMFILE
// is a reason to wait, not to stop serving.

func init() {
	strangerRoles["conns"] = func(node, arg string) error {
		n, err := strconv.Atoi(arg)
		if err != nil {
			return err
		}
		return holdConns(node, n)
	}
}

// holdConns is the "conns" role: it opens n connections to node, makes
// VERSION on each, prints how many were served ("served K") and
// "holding", and holds them all until it is killed.
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
	fmt.Println("holding")
	select {}
}

// served reads the "conns" stranger's count of served connections.
func served(t *testing.T, s *stranger) int {
	t.Helper()
	lines := s.until(t, "holding")
	var n int
	require.Equal(t, 1, len(lines), "the hostile process printed %q", lines)
	_, err := fmt.Sscanf(lines[0], "served %d", &n)
	require.NoError(t, err, "the hostile process printed %q", lines[0])
	return n
}

func TestConnectionsPerUidAreCapped(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("running a process as another uid needs root")
	}
	for _, tc := range []struct {
		name string
		args []string
		cap  int
	}{
		{"-max-conns-per-uid 8", []string{"-max-conns-per-uid", "8"}, 8},
		// No flag, so this one runs against a daemon from before the cap too.
		{"the default", nil, server.DefaultMaxConnsPerUID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, tc.args...)
			s := startStranger(t, "conns", d.node, "200", &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
			if n := served(t, s); n > tc.cap {
				t.Errorf("one uid holds %d served connections; want at most the cap, %d", n, tc.cap)
			}
			d.live(t, "while another uid holds its connections")
			d.stop(t)
		})
	}
}

func TestAConnectionThatNeverAttachesIsDropped(t *testing.T) {
	d := startDaemon(t, "-attach-timeout", "300ms")
	silent, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: d.node, Net: "unixpacket"})
	require.NoError(t, err)
	defer silent.Close()
	r := dialRaw(t, d.node)
	r.negotiate() // VERSION, then nothing
	d.live(t, "beside the silent connections")
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(patience))
	if _, err := silent.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection that said nothing: read %v after %v; want it closed by the daemon", err, time.Since(start))
	}
	r.sock.SetReadDeadline(time.Now().Add(patience))
	if _, err := r.sock.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a connection that made VERSION and no more: read %v after %v; want it closed by the daemon", err, time.Since(start))
	}
	d.live(t, "after dropping them")
	d.stop(t)
}

func TestAcceptThroughDescriptorExhaustion(t *testing.T) {
	d := startDaemon(t, "-max-conns-per-uid", "100000")
	// The daemon may have 64 descriptors: the stranger's connections
	// take the rest, two each (the connection and the pidfd of its
	// process, exitwatch.go), and accept fails with EMFILE. Each
	// connection the daemon cannot accept costs the stranger 300 ms
	// (holdConns), so it makes no more than it needs to.
	lim := unix.Rlimit{Cur: 64, Max: 64}
	if err := unix.Prlimit(d.cmd.Process.Pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Skipf("prlimit on the daemon: %v", err)
	}
	hog := startStranger(t, "conns", d.node, "40", nil)
	served(t, hog)
	select {
	case err := <-d.exited:
		d.exited <- err
		t.Fatalf("softgpud exited when accept ran out of descriptors: %v\n%s", err, d.log())
	case <-time.After(200 * time.Millisecond):
	}
	hog.cmd.Process.Kill()
	hog.cmd.Wait()
	d.live(t, "after the descriptors came back")
	if n := strings.Count(d.log(), "backing off"); n != 1 {
		t.Errorf("the daemon logged %d back-offs for one burst of EMFILE; want 1\n%s", n, d.log())
	}
	d.stop(t)
}
