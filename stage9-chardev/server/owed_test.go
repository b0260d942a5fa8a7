package server

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/driver"
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

// owingClient starts a daemon whose uid quota is one DMA window entry, and
// a client of uid 7 holding that entry, owed: it freed it behind a DELAY
// of delay cycles (ns) on context 0's copy channel, which any region's
// entry waits for (driver/bound.go, namers). It returns the daemon, the
// client and the DELAY's Pending.
func owingClient(t *testing.T, delay uint64) (*Server, *client, *driver.Pending) {
	t.Helper()
	cfg := Config{Node: filepath.Join(t.TempDir(), "card0"), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		UidQuota: Quota{WindowEntries: 1}}
	cfg.Device.MemorySize = 16 << 20
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	c := &client{s: s, uid: 7}
	require.NoError(t, c.charge(uapi.Pools{WindowEntries: 1}))
	region, err := s.drv.HostAlloc(4096)
	require.NoError(t, err)
	p, err := s.drv.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpDelay, Value: delay}})
	require.NoError(t, err)
	back, err := s.drv.HostFreeRelease(region)
	require.NoError(t, err)
	c.owe(uapi.Pools{WindowEntries: 1}, back)
	return s, c, p
}

// countSleeps has owedSleep count the waits of refused calls, and run
// during(the count so far) before each; it is time.Sleep again when the
// test ends.
func countSleeps(t *testing.T, during func(n int)) *int {
	t.Helper()
	n := new(int)
	owedSleep = func(d time.Duration) {
		*n++
		during(*n)
		time.Sleep(d)
	}
	t.Cleanup(func() { owedSleep = time.Sleep })
	return n
}

// TestARefusalWaitsOnlyForWhatTheClientItselfOwes: a call its quota
// refuses while its uid owes waits (owed.go, chargeOwed) only if the
// client itself owes some of what it asks for, behind work that may be
// about to pass. One that owes nothing is refused at once, having had
// the driver reclaim at most once: when every refusal of an owing uid
// waited a tenth of a second, reclaiming every millisecond, a stranger
// that owed for minutes had the daemon reclaim some ninety times per
// refused call. And a client that freed behind its own work gets the
// entry once that work has run, whether it ran before the call or while
// the call waited.
func TestARefusalWaitsOnlyForWhatTheClientItselfOwes(t *testing.T) {
	entry := uapi.Pools{WindowEntries: 1}
	t.Run("another client's", func(t *testing.T) {
		s, owner, p := owingClient(t, 2_000_000_000) // 2 s: far past the call
		other := &client{s: s, uid: owner.uid}
		sleeps := countSleeps(t, func(int) {})
		before := s.settles.Load()
		err := other.charge(entry)
		if err == nil && p.Fence().Signaled() { // the machine held this goroutine for 2 s
			t.Skip("the DELAY ran before the call")
		}
		require.ErrorIs(t, err, uapi.ErrQuota, "a client of uid %d owing nothing itself, its uid's one entry owed by another", owner.uid)
		assert.Contains(t, err.Error(), "freed but held by the driver", "the refusal says what is owed")
		assert.LessOrEqual(t, s.settles.Load()-before, uint64(1), "reclaims for a refusal the client has nothing of its own to wait for")
		assert.Zero(t, *sleeps, "waits of a refusal the client has nothing of its own to wait for")
	})
	t.Run("its own, run before the call", func(t *testing.T) {
		s, owner, p := owingClient(t, 1_000_000) // 1 ms
		require.NoError(t, p.Wait())
		require.NoError(t, owner.charge(entry), "the entry the client freed behind its own work, run but not yet reclaimed")
		s.quotaMu.Lock()
		defer s.quotaMu.Unlock()
		assert.Empty(t, s.owed, "the owed charges once the entry is charged again")
	})
	t.Run("its own, run while the call waits", func(t *testing.T) {
		s, owner, p := owingClient(t, 200_000_000) // 200 ms: past the first try, and owedWait's whole
		// The first wait runs out the DELAY: the call must wait for it,
		// then settle and have the entry, however long that took.
		sleeps := countSleeps(t, func(n int) {
			if n == 1 {
				require.NoError(t, p.Wait())
			}
		})
		require.NoError(t, owner.charge(entry), "the entry the client freed behind its own DELAY of 200 ms")
		if *sleeps == 0 {
			t.Skip("the DELAY ran before the call (a loaded machine): nothing was waited for")
		}
		s.quotaMu.Lock()
		defer s.quotaMu.Unlock()
		assert.Empty(t, s.owed, "the owed charges once the entry is charged again")
	})
}

// TestTheRefusedCallsOfAnOwingUidSettleOnlyOnItsTurns: however often the
// clients of an owing uid are refused, the driver reclaims for them only
// on the uid's turns (settleDue), which come after gaps doubling from
// firstGap to lastGap. A refusal that reclaimed every time would let a
// stranger's loop of cheap refused calls have the daemon scan all that
// is deferred, under the driver's locks, once per call.
func TestTheRefusedCallsOfAnOwingUidSettleOnlyOnItsTurns(t *testing.T) {
	s, owner, p := owingClient(t, 2_000_000_000) // 2 s: past the loop
	other := &client{s: s, uid: owner.uid}
	before, start, calls := s.settles.Load(), time.Now(), 0
	for ; time.Since(start) < 300*time.Millisecond; calls++ { // past several turns
		err := other.charge(uapi.Pools{WindowEntries: 1})
		if err == nil && p.Fence().Signaled() {
			t.Skip("the DELAY ran out during the loop (a loaded machine)")
		}
		require.ErrorIs(t, err, uapi.ErrQuota, "call %d", calls+1)
		time.Sleep(100 * time.Microsecond) // a client's round trip, about
	}
	took := time.Since(start)
	// The turns that fit in took are one at the start, then one after
	// each gap of 1, 2, 4 … 32 ms, then one every lastGap (64 ms): at
	// most 8 + took/lastGap. The bound allows one every 10 ms, and ten
	// more; a refusal that reclaims every millisecond, or once a call,
	// passes it many times over. A slower machine only makes took, and
	// so the bound, larger.
	most := uint64(10 + took/(10*time.Millisecond))
	settles := s.settles.Load() - before
	t.Logf("%d refused calls in %v: %d reclaims", calls, took, settles)
	assert.LessOrEqual(t, settles, most, "reclaims for %d refused calls of uid %d over %v", calls, owner.uid, took)
}
