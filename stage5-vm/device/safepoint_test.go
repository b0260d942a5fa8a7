package device

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage5-vm/abi"
)

// TestNothingIsReadAfterUnmap: an engine answers an invalidation only at a
// safe point, where it holds no translation. Here the driver's part is
// played by a Resolved hook: as soon as the copy engine has resolved a COPY's
// source run, the source page is unmapped (its entry cleared, an
// invalidation of it requested); when the engine has resolved the
// destination run and is about to move the bytes, the hook looks at the
// acknowledgement. Had the engine acknowledged by then, the driver's Unmap
// would have returned and the frame could belong to someone else: the hook
// gives it a new owner and new bytes, as reuse would. The copy must deliver
// the old owner's bytes — it translated the source before the unmap — and
// never the new owner's.
func TestNothingIsReadAfterUnmap(t *testing.T) {
	const src, dst = uint64(1) << 40, uint64(1)<<40 + 1<<30
	const srcPA, dstPA = 0x10000, 0x20000
	var (
		d       *Device
		tb      *tables
		root    uint64
		gen     uint64
		reused  bool
		ackedAt string
	)
	ack := abi.EngineStatusPage(abi.EngineCopy) + abi.RegInvalAck
	d = openTest(t, Config{})
	d.SetHooks(Hooks{Resolved: func(e abi.Engine, va uint64, write bool) {
		switch {
		case va == src && !write:
			tb.write(leafOf(tb, root, src), 0) // the driver's unmapRange
			d.regs.Store(abi.RegInvalCtx, uint64(testCtx))
			d.regs.Store(abi.RegInvalVA, src)
			d.regs.Store(abi.RegInvalSize, 4096)
			d.regs.Store(abi.RegInvalGen, gen)
		case va == dst && write && d.regs.Load(ack) == gen:
			// Unmap has returned: the frame is reused and overwritten.
			fillBytes(d.mem[srcPA:srcPA+4096], 0xbb)
			reused, ackedAt = true, "between the source's translation and the move"
		}
	}})
	setIdle(d, abi.EngineCopy, abi.IdleSpin, 0)
	tb, root = userTables(t, d)
	tb.mapPage(t, root, src, srcPA, abi.Page4K, false, false)
	tb.mapPage(t, root, dst, dstPA, abi.Page4K, true, false)
	gen = d.regs.Load(abi.RegInvalGen) + 1
	fillBytes(d.mem[srcPA:srcPA+4096], 0xaa) // the old owner's bytes
	require.Equal(t, abi.StatusOK, run(t, d, abi.EngineCopy, abi.Command{Op: abi.OpCopy, Ctx: testCtx, Src: src, Dst: dst, Size: 4096}), "COPY; want OK (its source was mapped when it was translated)")
	if reused {
		t.Errorf("the engine acknowledged the source's invalidation %s", ackedAt)
	}
	for i, b := range d.mem[dstPA : dstPA+4096] {
		require.Equal(t, byte(0xaa), b, "destination byte %d = %#x after the COPY; want 0xaa (the source's owner before the unmap), never 0xbb (the next owner's)", i, b)
	}
	// The engine still answers: the COPY was its last command, and an idle
	// engine holds no translation, which the driver reads as an answer.
	state := abi.EngineStatusPage(abi.EngineCopy) + abi.RegEngineState
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, d.regs.Load(ack) == gen || d.regs.Load(state) == abi.EngineIdle,
			"invalidation answered after the COPY (ack %d of %d, engine state %d)", d.regs.Load(ack), gen, d.regs.Load(state))
	}, 10*time.Second, time.Millisecond)
}

func fillBytes(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}
