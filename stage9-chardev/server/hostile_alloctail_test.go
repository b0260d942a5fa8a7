package server_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/client"
)

// The attack: a stranger reads another client's freed device memory
// through the tail of an ALLOC whose size is not a whole number of its
// pages. ALLOC maps the size rounded up to the page it chose (a 64 KiB
// page for 64 KiB and more; a 4 KiB page below), and charges the rounded
// size, but driver.Context.Alloc clears only the size asked for: the rest
// of the last page is mapped into the new owner's context as the last
// owner left it. The stranger allocates 64 KiB + 1 byte (mapped as two
// 64 KiB pages, 65535 bytes past its size) and COPYs the whole mapping
// out; the engines translate by page and never knew the size.

func init() {
	strangerRoles["alloc-tail"] = allocTailStranger
}

// allocTailStranger allocates, arg bytes in all, buffers of 64 KiB + 1
// byte, reads back the 128 KiB each is mapped with (its size rounded up
// to the 64 KiB page), and prints how many bytes of each value it found
// that were not zero, then "done".
func allocTailStranger(node, arg string) error {
	var total uint64
	fmt.Sscan(arg, &total)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size, mapped = 64<<10 + 1, 128 << 10
	counts := map[byte]int{}
	buf := make([]byte, mapped)
	for got := uint64(0); got < total; got += mapped {
		p, err := g.Alloc(size)
		if err != nil {
			break // the device is full
		}
		if err := g.Read(buf, p); err != nil {
			fmt.Println(errnoLine("read of the mapped tail", err))
			break
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

// TestAStrangerCannotReadAnotherClientsFreedMemoryPastItsAllocSize: a
// well-behaved client fills a 1 MiB buffer with a secret (0xa7), frees it
// and closes; a stranger of another uid allocates 64 KiB + 1 byte at a
// time and reads each allocation's whole last page: it must find zeroes
// (or be refused the bytes past its size), never the secret.
func TestAStrangerCannotReadAnotherClientsFreedMemoryPastItsAllocSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	const secret = 0xa7
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

	cred, _ := strangerCred()
	s := startStranger(t, "alloc-tail", d.node, fmt.Sprint(8<<20), cred)
	lines := s.findings(t)
	t.Logf("stranger: %q", lines)
	for _, line := range lines {
		require.NotContains(t, line, fmt.Sprintf("%d:", secret), "the stranger read the well-behaved client's freed bytes (%#x) past the end of its own ALLOC", secret)
	}
	d.live(t, "after the stranger")
	d.stop(t)
}
