package server_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/server"
)

// The pager (pager.go) across a real process boundary: the daemon in the
// test's process, a client in a process of its own (the "pager" role),
// whose host accesses to managed memory fault to the daemon. The client
// runs its collector without pause (GOGC=1 and a goroutine looping
// runtime.GC): a goroutine waiting in a fault must not stop the world
// for good, as it does when a process answers its own faults
// (cmd/uffdstw).

// pagerSize is the managed allocation the pager role works on: not a
// whole number of pages.
const pagerSize = 1<<20 + 3*1024

// pagerClient is the "pager" role: for laps rounds, the device writes the
// whole allocation and the host reads it with no Sync, then the host
// writes it and the device reads it; then a random interleaving of host
// and device accesses (seeded) against a model, verified byte for byte.
func pagerClient(node string, seed, laps int) error {
	debug.SetGCPercent(1)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the collector, without pause
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(pagerSize)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("AllocManaged: the allocation is not paged")
	}
	other, err := g.Alloc(pagerSize)
	if err != nil {
		return err
	}
	host := m.Bytes()
	got := make([]byte, pagerSize)
	for lap := range laps {
		// Device writes, host reads.
		v := byte(seed*17 + lap + 1)
		if err := g.Fill(m.Ptr(), pagerSize, v); err != nil {
			return fmt.Errorf("lap %d: Fill: %w", lap, err)
		}
		if i := firstNot(host, v); i >= 0 {
			return fmt.Errorf("lap %d: after the device filled it with %#x, the host reads %#x at byte %d", lap, v, host[i], i)
		}
		// Host writes, device reads.
		want := pattern(byte(seed+lap), pagerSize)
		copy(host, want)
		if err := g.Copy(other, m.Ptr(), pagerSize); err != nil {
			return fmt.Errorf("lap %d: Copy: %w", lap, err)
		}
		if err := g.Read(got, other); err != nil {
			return fmt.Errorf("lap %d: Read: %w", lap, err)
		}
		if i := firstDiff(got, want); i >= 0 {
			return fmt.Errorf("lap %d: the device read %#x at byte %d after the host wrote %#x", lap, got[i], i, want[i])
		}
	}
	if err := interleave(g, m, other, seed); err != nil {
		return err
	}
	fmt.Println("ok")
	return nil
}

// interleave runs a random sequence of host and device accesses over m,
// each checked against a model of what m holds, and checks all of m at
// the end through both sides.
func interleave(g *client.GPU, m *client.Managed, scratch client.Ptr, seed int) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 36))
	host := m.Bytes()
	model := make([]byte, pagerSize)
	copy(model, host)
	for step := range 400 {
		off := rng.IntN(pagerSize)
		n := 1 + rng.IntN(min(pagerSize-off, 64<<10))
		v := byte(rng.Uint32())
		switch op := rng.IntN(4); op {
		case 0: // the host writes
			for i := off; i < off+n; i++ {
				host[i] = v ^ byte(i)
				model[i] = v ^ byte(i)
			}
		case 1: // the device writes
			if err := g.Fill(m.Ptr()+client.Ptr(off), uint64(n), v); err != nil {
				return fmt.Errorf("step %d: Fill: %w", step, err)
			}
			for i := off; i < off+n; i++ {
				model[i] = v
			}
		case 2: // the host reads
			if i := firstDiff(host[off:off+n], model[off:off+n]); i >= 0 {
				return fmt.Errorf("step %d: the host reads %#x at byte %d; want %#x", step, host[off+i], off+i, model[off+i])
			}
		case 3: // the device reads
			got := make([]byte, n)
			if err := g.Copy(scratch, m.Ptr()+client.Ptr(off), uint64(n)); err != nil {
				return fmt.Errorf("step %d: Copy: %w", step, err)
			}
			if err := g.Read(got, scratch); err != nil {
				return fmt.Errorf("step %d: Read: %w", step, err)
			}
			if i := firstDiff(got, model[off:off+n]); i >= 0 {
				return fmt.Errorf("step %d: the device reads %#x at byte %d; want %#x", step, got[i], off+i, model[off+i])
			}
		}
	}
	if i := firstDiff(host, model); i >= 0 {
		return fmt.Errorf("at the end the host reads %#x at byte %d; want %#x", host[i], i, model[i])
	}
	return nil
}

// TestPagerHostAndDeviceSeeEachOthersWrites: across the boundary, the
// host reads what the device wrote and the device what the host wrote,
// with no Sync, with the client's collector running without pause; and a
// random interleaving of the two agrees with a model byte for byte.
func TestPagerHostAndDeviceSeeEachOthersWrites(t *testing.T) {
	s := serve(t, server.Config{})
	laps := 8
	if testing.Short() {
		laps = 3
	}
	for seed := range 2 {
		startChild(t, "pager", s.Node(), seed, laps).succeed(t)
	}
	st := s.ManagedStats()
	if st.HostFaults < uint64(laps) {
		t.Errorf("the daemon served %d host faults over %d laps of host reads after device writes; want at least one a lap", st.HostFaults, laps)
	}
	assert.Equal(t, uint64(0), st.PagerErrors, "%d pager calls failed", st.PagerErrors)
}

// pagerThrash is the "pagerthrash" role: the device writes page 0 and the
// host reads it back, up to 200 rounds, each round checked, until the
// daemon reports the page mapped remotely (the thrashing guard) and a few
// rounds have run that way; it prints "remote" if it saw that, then "ok".
func pagerThrash(node string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	m, err := g.AllocManaged(2 << 12)
	if err != nil {
		return err
	}
	if !m.Paged() {
		return fmt.Errorf("AllocManaged: the allocation is not paged")
	}
	host := m.Bytes()
	remoteRounds := 0
	for round := range 200 {
		v := byte(round + 1)
		if err := g.Fill(m.Ptr()+100, 200, v); err != nil {
			return fmt.Errorf("round %d: Fill: %w", round, err)
		}
		if host[100] != v || host[299] != v {
			return fmt.Errorf("round %d: the host reads %#x, %#x; want %#x", round, host[100], host[299], v)
		}
		host[300] = v // a host write the device never sees
		if _, remote := m.Resident(); remote > 0 {
			remoteRounds++
			if remoteRounds == 5 {
				fmt.Println("remote")
				break
			}
		}
	}
	fmt.Println("ok")
	return nil
}

// TestPagerThrashGuardSeesTheHost: a page the device writes and the host
// reads back, round after round, moves both ways each time — host faults
// now move it, as device faults always did — so the thrashing guard stage
// 8 built sees the ping-pong and maps the page remotely: from then on
// both sides reach the same host page with no migration, and the host's
// reads stay right. Like stage 8's TestManagedThrashingGuard, it relies on
// some rounds coming within the guard's lapse (500 µs of device time) of
// each other, with a threshold of 2 and up to 200 rounds to find them.
func TestPagerThrashGuardSeesTheHost(t *testing.T) {
	s := serve(t, server.Config{Driver: driver.Config{Prefetch: driver.PrefetchOff, ThrashThreshold: 2}})
	c := startChild(t, "pagerthrash", s.Node(), 0, 0)
	c.expect(t, "remote")
	c.succeed(t)
	if st := s.ManagedStats(); st.Thrashing == 0 || st.HostFaults == 0 {
		t.Errorf("Thrashing %d, HostFaults %d; want both above 0", st.Thrashing, st.HostFaults)
	}
}
