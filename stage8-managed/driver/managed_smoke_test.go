package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"softgpu/stage8-managed/abi"
	"softgpu/stage8-managed/device"
)

// TestManagedRoundTrip: the host writes managed memory, the device copies
// it to device memory and back into a second managed allocation, the host
// reads the result after Sync — the same bytes, and faults were served.
func TestManagedRoundTrip(t *testing.T) {
	for _, pol := range []Prefetch{PrefetchWindow, PrefetchOff, PrefetchAdaptive} {
		t.Run(pol.String(), func(t *testing.T) {
			d := openWith(t, device.Config{}, Config{Prefetch: pol})
			ctx, err := d.NewContext()
			require.NoError(t, err)
			ch, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{})
			require.NoError(t, err)
			cc, err := d.NewChannel(abi.EngineCompute, ctx, ChannelOptions{})
			require.NoError(t, err)
			const size = 300<<10 + 123
			src, err := ctx.AllocManaged(size)
			require.NoError(t, err)
			dst, err := ctx.AllocManaged(size)
			require.NoError(t, err)
			mid, err := ctx.Alloc(size, 0)
			require.NoError(t, err)
			for i := range src.Bytes() {
				src.Bytes()[i] = byte(i*13 + i>>12)
			}
			require.NoError(t, ch.Submit(abi.Command{Op: abi.OpCopy, Ctx: ctx.ID(), Src: src.VA(), Dst: mid, Size: size}))
			require.NoError(t, ch.Submit(abi.Command{Op: abi.OpCopy, Ctx: ctx.ID(), Src: mid, Dst: dst.VA(), Size: size}))
			require.NoError(t, cc.Submit(abi.Command{Op: abi.OpAdd32, Ctx: ctx.ID(), Dst: dst.VA(), Size: 4096, Value: 1}))
			require.NoError(t, dst.Sync())
			want := bytes.Clone(src.Bytes())
			for i := 0; i < 4096; i += 4 {
				v := uint32(want[i]) | uint32(want[i+1])<<8 | uint32(want[i+2])<<16 | uint32(want[i+3])<<24
				v++
				want[i], want[i+1], want[i+2], want[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			}
			require.Equal(t, want, dst.Bytes(), "the bytes that came back differ")
			s := d.ManagedStats()
			t.Logf("%+v", s)
			if s.Faults == 0 || s.ToDevice == 0 || s.ToHost == 0 {
				t.Fatalf("stats %+v: want faults, and pages moved both ways", s)
			}
		})
	}
}

// TestAWindowLandsInConsecutiveFrames: a window of pages moved to the
// device gets frames one after another, so the engine moves it as one run
// — the first time, and again after Sync has given the frames back (which
// must return them to the pool in an order that keeps them so).
func TestAWindowLandsInConsecutiveFrames(t *testing.T) {
	d := openWith(t, device.Config{}, Config{ThrashThreshold: -1}) // each round moves the pages: not thrashing here
	ctx, err := d.NewContext()
	require.NoError(t, err)
	ch, err := d.NewChannel(abi.EngineCopy, ctx, ChannelOptions{})
	require.NoError(t, err)
	m, err := ctx.AllocManaged(DefaultPrefetchPages << abi.PageShift)
	require.NoError(t, err)
	for round := range 3 {
		require.NoError(t, ch.Submit(abi.Command{Op: abi.OpFill, Ctx: ctx.ID(), Dst: m.VA(), Size: m.Size(), Value: 1}))
		d.um.mu.Lock()
		for i := 1; i < len(m.pages); i++ {
			if p, prev := m.pages[i], m.pages[i-1]; p.where != pageDevice || p.frame != prev.frame+1<<abi.PageShift {
				d.um.mu.Unlock()
				t.Fatalf("round %d: page %d is in frame %#x after page %d's %#x (place %d); want the next frame", round, i, p.frame, i-1, prev.frame, p.where)
			}
		}
		d.um.mu.Unlock()
		require.NoError(t, m.Sync())
	}
}
