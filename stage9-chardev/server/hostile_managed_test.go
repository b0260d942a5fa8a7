package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/device"
)

// Managed memory against the device-memory quota. The quota counts
// ALLOC's bytes; a managed allocation is charged as pinned host bytes,
// and its pages take device frames only as they move. Those frames come
// from the same device memory ALLOC hands out, so a stranger whose
// managed pages filled the device — or had filled it once, and left the
// frames in the frame pool — took device memory past its quota, and a
// client of another uid was refused its own share (ErrNoMemory) for as
// long as the stranger lived. Managed pages are a cache of device memory
// (stage 8 evicts them when the device is full); an ALLOC that finds the
// device full takes its memory back from them.

func init() {
	strangerRoles["managedhog"] = managedHog
}

// managedHog makes a managed allocation of 32 MiB — twice the test's
// device — and moves it to the device (arg "device"), or there and back
// to the host (arg "pool": every frame it took sits free in the driver's
// frame pool); it says "done" and holds the allocation until it is
// killed.
func managedHog(node, arg string) error {
	const size = 32 << 20
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	m, err := g.AllocManaged(size)
	fmt.Println(errnoLine("managed", err))
	if err != nil {
		fmt.Println("done")
		select {}
	}
	moves := []client.Location{client.ToDevice}
	if arg == "pool" {
		moves = append(moves, client.ToHost)
	}
	for _, to := range moves {
		mg, err := m.Prefetch(0, size, to)
		if err == nil {
			err = mg.Wait()
		}
		fmt.Println(errnoLine(fmt.Sprintf("prefetch to %d", to), err))
	}
	fmt.Println("done")
	select {} // hold it until killed
}

func TestAStrangersManagedPagesDoNotTakeAnothersQuota(t *testing.T) {
	cred, _ := strangerCred()
	for _, where := range []string{"device", "pool"} {
		t.Run("pages="+where, func(t *testing.T) {
			// Each client may have 4 MiB of the 16 MiB device beside its
			// two channels' context-save areas, and pin 64 MiB of host
			// memory.
			memory := strconv.Itoa(4<<20 + 2*device.DefaultContextSize)
			d := startDaemon(t, "-client-memory", memory, "-uid-memory", memory,
				"-client-pinned", strconv.Itoa(64<<20), "-uid-pinned", strconv.Itoa(64<<20))
			w := dialWellBehaved(t, d.node)
			w.roundTrip(t, "before", 1)
			s := startStranger(t, "managedhog", d.node, where, cred)
			want := []string{"managed ok", "prefetch to 1 ok"}
			if where == "pool" {
				want = append(want, "prefetch to 2 ok")
			}
			if got := s.until(t, "done"); !slices.Equal(got, want) {
				t.Fatalf("the stranger said %q; want %q", got, want)
			}
			// The well-behaved client, another uid, gets its quota in full.
			for i := range 4 {
				if _, err := w.g.Alloc(1 << 20); err != nil {
					t.Fatalf("the well-behaved client's Alloc %d of 1 MiB (of its quota of 4) beside a stranger whose managed pages %s: %v",
						i, map[string]string{"device": "fill the device", "pool": "went to the device and back"}[where], err)
				}
			}
			w.roundTrip(t, "beside the stranger", 2)
			d.stop(t)
		})
	}
}
