package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
)

// The DMA window by default (issue 32, item 5): softgpud's default quotas
// let one client alone use the whole device — all of its memory, all of
// its channels — but for the DMA window, of which no quota grants every
// entry, so no stranger can take them all. This test starts softgpud with
// no quota flag at all (so it runs against a daemon from before quotas
// too, through SOFTGPUD_BIN): a stranger of another uid registers 4 KiB
// memfds until it is refused and holds them, and a well-behaved client
// can still register host memory and run a round trip through it.

func init() {
	strangerRoles["window-hog"] = windowHog
}

// windowHog is the "window-hog" role: it registers 4 KiB of host memory
// at a time, each a window entry, until it is refused (or has more than
// the device has, 64), says how many it got and how it was refused,
// "done", and holds them until it is killed.
func windowHog(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	n := 0
	for ; n < 100; n++ {
		if _, err := g.HostAlloc(4096); err != nil {
			fmt.Printf("entries %d\n", n)
			fmt.Println(errnoLine("hostalloc", err))
			break
		}
	}
	fmt.Println("done")
	select {} // hold them until killed
}

func TestNoStrangerTakesTheWholeWindowByDefault(t *testing.T) {
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the victim must be of another uid than the stranger (a uid's quota is the uid's), which needs root")
	}
	d := startDaemon(t) // no quota flag: the defaults
	d.live(t, "before")
	s := startStranger(t, "window-hog", d.node, "", cred)
	got := s.until(t, "done")
	t.Logf("the stranger: %q", got)
	require.NotEmpty(t, got, "the stranger registered more than the device's 64 window entries")
	require.True(t, strings.HasPrefix(got[0], "entries "), "the stranger said %q", got)

	// The victim, dialled after the stranger took what it could: a new
	// client's HOST_REGISTER, and a round trip through it.
	w, err := client.Dial(d.node)
	require.NoError(t, err, "the victim's Dial beside the stranger")
	defer w.Close()
	h, err := w.HostAlloc(4096)
	require.NoError(t, err, "the victim's HostAlloc of 4 KiB beside a stranger that registered all it could (%q); want an entry of its own", got)
	require.NoError(t, w.Fill(h.Ptr(), 4096, 0x3c), "the victim's Fill of its host page")
	for i, b := range h.Bytes() {
		require.Equal(t, byte(0x3c), b, "the victim's byte %d", i)
	}
	d.live(t, "beside the stranger")
	d.stop(t)
}
