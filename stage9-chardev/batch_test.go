package softgpu_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
)

func TestBatch(t *testing.T) {
	g := openTest(t)
	a := mustAlloc(t, g, 256)
	b := mustAlloc(t, g, 256)
	bt := g.NewBatch(softgpu.Copy)
	bt.Fill(a, 256, 0x5a)
	bt.Fill(a+16, 16, 0x01)
	bt.Copy(b, a, 256)
	bt.Nop()
	require.Equal(t, 4, bt.Len(), "Len")
	bells := g.Doorbells()
	p, err := bt.Submit()
	must(t, err)
	must(t, p.Wait())
	if rung := g.Doorbells() - bells; rung != 1 {
		t.Errorf("a batch of 4 rang %d doorbells; want 1", rung)
	}
	assert.Equal(t, 0, bt.Len(), "Len after Submit")
	got := make([]byte, 256)
	must(t, g.Read(got, b))
	want := bytes.Repeat([]byte{0x5a}, 256)
	copy(want[16:32], bytes.Repeat([]byte{0x01}, 16))
	assert.Equal(t, want, got, "Read after the batch = % x...; want % x...", got[:40], want[:40])
}

func TestBatchWithABadCommand(t *testing.T) {
	g := openTest(t)
	p := mustAlloc(t, g, 64)
	bt := g.NewBatch(softgpu.Compute)
	bt.Fill(p, 64, 0)
	bt.Add32(p+2, 4, 1) // misaligned
	bt.Add32(p, 64, 7)
	bt.Sum32(p+56, p, 48)
	pend, err := bt.Submit()
	must(t, err)
	err = pend.Wait()
	assert.ErrorIs(t, err, abi.StatusMisaligned, "Wait")
	for i, want := range []error{nil, abi.StatusMisaligned, nil, nil} {
		assert.ErrorIs(t, pend.Err(i), want, "Err(%d)", i)
	}
	got := make([]byte, 8)
	must(t, g.Read(got, p+56))
	assert.Equal(t, uint64(12*7), uint64(got[0])|uint64(got[1])<<8, "Sum32 after the failed Add32; want %d (the commands around it ran)", 12*7)
}

func TestAsync(t *testing.T) {
	g := openTest(t)
	a := mustAlloc(t, g, 4096)
	b := mustAlloc(t, g, 4096)
	var pending []*softgpu.Pending
	for i := range 16 {
		p, err := g.FillAsync(a+softgpu.Ptr(256*i), 256, byte(i))
		must(t, err)
		pending = append(pending, p)
	}
	p, err := g.CopyAsync(b, a, 4096) // runs after every fill: same engine, in order
	must(t, err)
	must(t, p.Wait()) // waiting for the last is enough ...
	for _, p := range pending {
		must(t, p.Wait()) // ... but each may be waited for, in any order
	}
	got := make([]byte, 4096)
	must(t, g.Read(got, b))
	for i := range 16 {
		if got[256*i] != byte(i) || got[256*i+255] != byte(i) {
			t.Errorf("block %d = %#x; want %#x", i, got[256*i], byte(i))
		}
	}
}

func TestBatchAfterClose(t *testing.T) {
	g := openTest(t)
	bt := g.NewBatch(softgpu.Copy)
	bt.Nop()
	must(t, g.Close())
	_, err := bt.Submit()
	assert.ErrorIs(t, err, driver.ErrClosed, "Submit after Close")
	_, err = g.FillAsync(0, 0, 0)
	assert.ErrorIs(t, err, driver.ErrClosed, "FillAsync after Close")
}
