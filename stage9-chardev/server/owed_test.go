package server

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/uapi"
)

// TestWhatAClientOwesWhenItGoesIsItsUidsUntilGivenBack: the ledger of
// owed.go. A client that has freed something the driver still holds —
// here a window entry retiring behind a DELAY on context 0's channel,
// whose commands may name any region (driver/bound.go, namers) — still
// holds its charge; when it goes (orphanOwed, then refundAll, as
// teardown does) the charge stays with its uid, and no client; and once
// the DELAY has run, settle has the driver give the entry back and
// refunds the uid.
func TestWhatAClientOwesWhenItGoesIsItsUidsUntilGivenBack(t *testing.T) {
	const delay = 300_000_000 // cycles: 300 ms, to go and look in while the DELAY runs
	const uid = 7
	cfg := Config{Node: filepath.Join(t.TempDir(), "card0"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Device.MemorySize = 16 << 20
	s, err := New(cfg)
	require.NoError(t, err)
	defer s.Close()
	c := &client{s: s, uid: uid}
	entry := uapi.Pools{WindowEntries: 1}
	require.NoError(t, c.charge(entry))
	region, err := s.drv.HostAlloc(4096)
	require.NoError(t, err)

	start := s.drv.Now()
	p, err := s.drv.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: delay}})
	require.NoError(t, err)
	back, err := s.drv.HostFreeRelease(region)
	require.NoError(t, err)
	c.owe(entry, back)
	s.settle()
	c.orphanOwed()
	c.refundAll()
	s.quotaMu.Lock()
	use, owed := s.uidUse[uid], len(s.owed)
	var held uapi.Pools
	if use != nil {
		held = *use
	}
	s.quotaMu.Unlock()
	if s.drv.Now()-start < delay { // the device's clock: the DELAY has not run, so the entry is retiring
		assert.Equal(t, entry, held, "uid %d's use, its client gone, the entry it freed retiring behind context 0's DELAY", uid)
		assert.Equal(t, 1, owed, "the owed charges")
		assert.Equal(t, uapi.Pools{}, c.use, "the gone client's use")
	} else {
		t.Log("the DELAY ran out before the client had gone (a loaded machine): only the refund is checked")
	}

	require.NoError(t, p.Wait())
	s.settle()
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	assert.Empty(t, s.owed, "the owed charges once the DELAY has run and the driver given the entry back")
	assert.Nil(t, s.uidUse[uid], "uid %d's use once the driver has given the entry back", uid)
}
