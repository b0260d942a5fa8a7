package softgpu_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage8-managed"
	"softgpu/stage8-managed/internal/leakcheck"
)

// TestChannelAPI: a context's channel runs its commands in the context;
// a closed channel refuses more; bad options are ErrConfig or ErrRunlist.
func TestChannelAPI(t *testing.T) {
	leakcheck.Check(t)
	if _, err := softgpu.Open(softgpu.Config{Watchdog: -time.Second}); !errors.Is(err, softgpu.ErrConfig) {
		t.Errorf("Open with a negative watchdog = %v; want ErrConfig", err)
	}
	if _, err := softgpu.Open(softgpu.Config{PreemptTimeout: -time.Second}); !errors.Is(err, softgpu.ErrConfig) {
		t.Errorf("Open with a negative preempt timeout = %v; want ErrConfig", err)
	}
	g, err := softgpu.Open(softgpu.Config{MemorySize: 8 << 20})
	must(t, err)
	defer g.Close()
	ctx, err := g.NewContext()
	must(t, err)
	defer ctx.Close()
	if _, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Timeslice: -1}); !errors.Is(err, softgpu.ErrConfig) {
		t.Errorf("a negative timeslice = %v; want ErrConfig", err)
	}
	if _, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityRealtime + 1}); !errors.Is(err, softgpu.ErrRunlist) {
		t.Errorf("a priority above PriorityRealtime = %v; want ErrRunlist", err)
	}
	ch, err := ctx.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityHigh, Timeslice: 20 * time.Microsecond})
	must(t, err)
	p, err := ctx.Alloc(64 << 10)
	must(t, err)
	host, err := g.HostAlloc(64 << 10)
	must(t, err)
	defer g.HostFree(host)
	hp, err := ctx.Map(host, 0)
	must(t, err)
	must(t, ch.Fill(p, 64<<10, 0x42))
	must(t, ch.Copy(hp, p, 64<<10))
	for i, v := range host.Bytes() {
		require.Equal(t, byte(0x42), v, "byte %d read back through the context's channel is %#x", i, v)
	}
	pend, err := ch.FillAsync(p, 64, 1)
	must(t, err)
	must(t, pend.Wait())
	must(t, ch.Close())
	assert.ErrorIs(t, ch.Fill(p, 64, 1), softgpu.ErrClosed, "Fill on a closed channel")
	must(t, g.Fill(mustAlloc(t, g, 64), 64, 1)) // the default channel goes on
}

// TestTraceShowsPreemption: a traced run in which a high-priority channel
// preempts a long copy records the preempted slice and the switches.
func TestTraceShowsPreemption(t *testing.T) {
	leakcheck.Check(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	g, err := softgpu.Open(softgpu.Config{MemorySize: 64 << 20, Trace: path})
	must(t, err)
	bulk, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityLow})
	must(t, err)
	urgent, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityHigh})
	must(t, err)
	src, dst, flag := mustAlloc(t, g, 24<<20), mustAlloc(t, g, 24<<20), mustAlloc(t, g, 64)
	preempted := false
	for try := 0; try < 20 && !preempted; try++ {
		p, err := bulk.CopyAsync(dst, src, 24<<20) // about a millisecond
		must(t, err)
		time.Sleep(100 * time.Microsecond)
		must(t, urgent.Fill(flag, 64, 1))
		must(t, p.Wait())
		preempted = g.SchedStats().Preempts > 0
	}
	must(t, g.Close())
	if !preempted {
		t.Skip("the copy always finished before the fill arrived: nothing to see")
	}
	events := readTrace(t, path)
	var slices, switches int
	for _, ev := range events {
		switch {
		case ev.Name == "COPY (preempted)":
			slices++
		case ev.Name == "switch" && ev.Cat == "sched":
			switches++
		}
	}
	if slices == 0 || switches < 2 {
		t.Errorf("trace has %d preempted slices and %d switches; want some, and at least two (away and back)", slices, switches)
	}
}

// TestASubmitterWaitingForRoomOnAClosedChannelGetsErrClosed: a submitter
// waiting for a slot of a full ring when the channel is closed is refused —
// the drain that frees the slot is the channel leaving, not room — even if
// a new channel has taken the same id (and ring) by then. Accepted, its
// command would be written into a ring that is now another channel's, and
// its Wait would never end.
func TestASubmitterWaitingForRoomOnAClosedChannelGetsErrClosed(t *testing.T) {
	leakcheck.Check(t)
	g, err := softgpu.Open(softgpu.Config{MemorySize: 8 << 20, RingSize: 4})
	must(t, err)
	defer g.Close()
	ch, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{})
	must(t, err)
	flag := mustAlloc(t, g, 64)
	must(t, g.Fill(flag, 64, 0))
	b := ch.NewBatch() // fills the ring of four behind a long DELAY
	b.Delay(1 << 40)
	b.Nop()
	b.Nop()
	b.Nop()
	_, err = b.Submit()
	must(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := ch.FillAsync(flag, 64, 0x77) // waits for room
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	must(t, ch.Close())
	reopened, err := g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{})
	must(t, err)
	defer reopened.Close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, softgpu.ErrClosed, "FillAsync waiting for room on a channel closed meanwhile")
	case <-time.After(10 * time.Second):
		t.Fatal("FillAsync waiting for room on a closed channel has not returned after 10 s")
	}
	must(t, reopened.Nop())
	got := make([]byte, 64)
	must(t, g.Read(got, flag))
	assert.Equal(t, byte(0), got[0], "the flag reads %#x: a fill submitted on a closed channel ran", got[0])
}
