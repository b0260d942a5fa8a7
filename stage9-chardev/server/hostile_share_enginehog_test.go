package server_test

import (
	"fmt"
	"testing"
	"time"

	"softgpu/stage9-chardev/client"
)

// The device is software, in the daemon: its engines are the
// daemon's goroutines, on the daemon's CPUs and memory bus. A stranger
// that keeps the engines busy with its own device work — all of it
// within its quotas, memory it owns — makes the daemon's calls into
// another client's memory (copies too) slower, for the daemon's reasons,
// and their time is charged to that client's uid's share.

func init() {
	strangerRoles["enginehog"] = engineHog
}

// engineHog (arg: "clients MiB seconds") dials clients clients; each
// allocates MiB of device memory twice and, for seconds, fills one half
// on the compute engine and copies it to the other on the copy engine,
// without pause. It says "ready" once all are at work.
func engineHog(node, arg string) error {
	var clients, mib, seconds int
	fmt.Sscan(arg, &clients, &mib, &seconds)
	size := uint64(mib) << 20
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	errs := make(chan error, 2*clients)
	for range clients {
		g, err := client.Dial(node)
		if err != nil {
			return err
		}
		a, err := g.Alloc(size)
		if err != nil {
			return err
		}
		b, err := g.Alloc(size)
		if err != nil {
			return err
		}
		go func() {
			for v := 0; time.Now().Before(end); v++ {
				if err := g.Fill(a, size, byte(v)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
		go func() {
			for time.Now().Before(end) {
				if err := g.Copy(b, a, size); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	fmt.Println("ready")
	for range 2 * clients {
		if err := <-errs; err != nil {
			fmt.Printf("error: %v\n", err)
		}
	}
	return nil
}

// TestDeviceLoadBarsNoClient: a well-behaved client (uid 1000)
// goes round a paged 1 MiB allocation, 5 ms between laps — alone never
// judged — while two uid-65534 clients keep both engines filling and
// copying RT_ENGINEHOG_MIB (default 2) MiB of its own device memory. It
// must not be dropped, nor its uid barred. RT_ENGINEHOG_CLIENTS=0 is the
// control.
func TestDeviceLoadBarsNoClient(t *testing.T) {
	clients, mib := rtInt("RT_ENGINEHOG_CLIENTS", 2), rtInt("RT_ENGINEHOG_MIB", 2)
	underLoad(t, rtString("RT_VICTIM_ARG", "1 6 5ms"), "enginehog", true, fmt.Sprintf("%d %d 10", clients, mib),
		fmt.Sprintf("%d device-load clients, %d MiB each,", clients, mib))
}
