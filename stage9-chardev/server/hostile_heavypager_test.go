package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"softgpu/stage9-chardev/client"
)

// A well-behaved client that pages hard must not spend its uid's share
// of the pager (pagerShare): its calls are quick, however many.

func init() {
	strangerRoles["heavypager"] = heavyPager
}

// heavyPager (arg: seconds) has the device fill 1 MiB of paged managed
// memory and the host read every page of it back, again and again, a
// millisecond apart (the thrashing guard's lapse, so that every page
// moves both ways each round), for seconds; it says how many rounds it made and whether
// any read a wrong byte, then "done".
func heavyPager(node, arg string) error {
	var seconds int
	fmt.Sscan(arg, &seconds)
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	const size = 1 << 20
	m, err := g.AllocManaged(size)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("the allocation is not paged")
	}
	host := m.Bytes()
	rounds, wrong := 0, 0
	for end := time.Now().Add(time.Duration(seconds) * time.Second); time.Now().Before(end); rounds++ {
		v := byte(rounds%250 + 1)
		if err := g.Fill(m.Ptr(), size, v); err != nil {
			return fmt.Errorf("round %d: Fill: %w", rounds, err)
		}
		for i := 0; i < size; i += 4096 {
			if host[i] != v {
				wrong++
			}
		}
		// Past the thrashing guard's lapse (500 µs): without the pause
		// the guard maps the pages remotely after a few rounds, and
		// nothing moves.
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("rounds %d, wrong %d\n", rounds, wrong)
	fmt.Println("done")
	return nil
}

// TestAHeavyPagerIsNotJudged: a client of its own uid that has the
// device write 1 MiB of paged memory and the host read it all back,
// round after round for 6 s — every page moving both ways each round,
// its calls into its memory as many as the daemon can make — is neither
// dropped nor barred, and reads every byte right.
func TestAHeavyPagerIsNotJudged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	d := startDaemon(t)
	s := startStranger(t, "heavypager", d.node, "6", nil)
	said := s.until(t, "done")
	t.Logf("the heavy pager: %q", said)
	var rounds, wrong int
	if len(said) > 0 {
		fmt.Sscanf(said[0], "rounds %d, wrong %d", &rounds, &wrong)
	}
	assert.NotZero(t, rounds, "rounds the heavy pager made")
	assert.Zero(t, wrong, "pages the heavy pager read wrong")
	assert.Empty(t, dropped(d.log()), "the daemon dropped the heavy pager")
	assert.NotContains(t, d.log(), "barred from the pager until", "the daemon barred the heavy pager's uid")
	d.stop(t)
}
