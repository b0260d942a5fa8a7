package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
)

func init() {
	strangerRoles["hostwrite"] = hostWriteClient
}

// hostWriteClient is a well-behaved pager client: it writes a pattern
// into its managed allocation on the host, has the device copy the
// allocation (its pages move to the device: Protect, copy, Remove), and
// checks what the device read and what the host reads afterwards. It
// prints "device ok" or where the device's copy differs, then the same
// for the host ("host hung" if a host read did not return in 5 s), and
// "done".
func hostWriteClient(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size = 64 << 10
	m, err := g.AllocManaged(size)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("the allocation is not paged")
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	copy(m.Bytes(), want)
	other, err := g.Alloc(size)
	if err != nil {
		return err
	}
	if err := g.Copy(other, m.Ptr(), size); err != nil {
		return fmt.Errorf("Copy: %w", err)
	}
	got := make([]byte, size)
	if err := g.Read(got, other); err != nil {
		return fmt.Errorf("Read: %w", err)
	}
	if i := firstDiff(got, want); i >= 0 {
		fmt.Printf("device differs at byte %d: %#x, want %#x\n", i, got[i], want[i])
	} else {
		fmt.Println("device ok")
	}
	host := make(chan string, 1)
	go func() {
		if i := firstDiff(m.Bytes(), want); i >= 0 {
			host <- fmt.Sprintf("host differs at byte %d: %#x, want %#x", i, m.Bytes()[i], want[i])
		} else {
			host <- "host ok"
		}
	}()
	select {
	case line := <-host:
		fmt.Println(line)
	case <-time.After(5 * time.Second):
		fmt.Println("host hung")
	}
	fmt.Println("done")
	return nil
}

// TestAHelperDyingAfterItsPunchLosesNoData: a punch helper that dies
// between its fallocate and its reply (killed by an operator or the OOM
// killer at that moment; here, deterministically, a helper that exits
// after its first fallocate: punchThenDieHelper) makes Remove fail with
// errHelperLost, and the run stays on the host, mapped remotely. But the
// pages were punched out of the memfd already: their bytes are only in
// the frames the failed move gives back. The driver must put them back
// (moveRun, restoreHost) before it does; it did not, and a well-behaved
// client read zeros where it wrote its data, on the device and on the
// host ("device differs at byte 0: 0x0, want 0x3").
func TestAHelperDyingAfterItsPunchLosesNoData(t *testing.T) {
	bin, err := os.Executable()
	require.NoError(t, err)
	wrapper := filepath.Join(t.TempDir(), "punch-then-die")
	require.NoError(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\n%s=punch-then-die exec %q \"$@\"\n", server.PunchThenDieEnv, bin)), 0o755))
	s := serve(t, server.Config{})
	server.SetPunchHelperExe(s, wrapper)
	c := startStranger(t, "hostwrite", s.Node(), "", nil)
	got := c.findings(t)
	st := s.ManagedStats()
	t.Logf("the client: %q; pager errors %d, host faults %d", got, st.PagerErrors, st.HostFaults)
	require.NotZero(t, st.PagerErrors, "no Remove failed: the stand-in helper did not run")
	assert.Equal(t, []string{"device ok", "host ok"}, got, "what a well-behaved client read back after its helper died past its punch")
}
