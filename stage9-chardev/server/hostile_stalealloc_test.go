package server_test

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

// The attack: a stranger reads the bytes another client left in device
// memory it freed. ALLOC hands out device memory as the allocator finds
// it (driver.Context.Alloc): nothing clears what the previous owner
// wrote, and the new owner may COPY it out at once. A well-behaved client
// writes a secret into a buffer, frees it and goes; the stranger (uid
// nobody) then allocates device memory and reads it back.

func init() {
	strangerRoles["stale-alloc"] = staleAllocStranger
}

// staleAllocStranger allocates arg bytes of device memory in 64 KiB
// buffers, reads each back through the client library, and prints how
// many bytes of each value it found that were not zero, then "done".
func staleAllocStranger(node, arg string) error {
	var total uint64
	fmt.Sscan(arg, &total)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size = 64 << 10
	counts := map[byte]int{}
	buf := make([]byte, size)
	for got := uint64(0); got < total; got += size {
		p, err := g.Alloc(size)
		if err != nil {
			break // the device is full
		}
		if err := g.Read(buf, p); err != nil {
			return err
		}
		for _, b := range buf {
			if b != 0 {
				counts[b]++
			}
		}
	}
	fmt.Printf("non-zero bytes read from fresh allocations: %v\n", counts)
	fmt.Println("done")
	return nil
}

// TestAStrangerCannotReadAnotherClientsFreedDeviceMemory: a well-behaved
// client fills a 1 MiB buffer with a secret (0xc3), frees it and closes;
// a stranger of another uid allocates device memory and reads it: it must
// not find the secret.
func TestAStrangerCannotReadAnotherClientsFreedDeviceMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	const secret = 0xc3
	g, err := client.Dial(d.node)
	require.NoError(t, err)
	p, err := g.Alloc(1 << 20)
	require.NoError(t, err)
	require.NoError(t, g.Fill(p, 1<<20, secret))
	check := make([]byte, 1<<20)
	require.NoError(t, g.Read(check, p))
	require.Equal(t, bytes.Repeat([]byte{secret}, 1<<20), check, "the well-behaved client's own buffer")
	require.NoError(t, g.Free(p))
	require.NoError(t, g.Close())

	s := startStranger(t, "stale-alloc", d.node, fmt.Sprint(8<<20), &syscall.Credential{Uid: strangerUID, Gid: strangerUID})
	lines := s.findings(t)
	t.Logf("stranger: %q", lines)
	for _, line := range lines {
		require.NotContains(t, line, fmt.Sprintf("%d:", secret), "the stranger read the well-behaved client's freed bytes (%#x)", secret)
	}
	d.stop(t)
}
