package driver

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
)

// TestAnUnstartedChannelIsListedOnlyByStart: a channel opened with
// ChannelOptions.Start is on no list the driver walks and takes no
// submission until Channel.Start has called the option and listed it; a
// refused Start leaves it as it was, to be started again; a second Start
// is refused; and an unstarted channel closes, its id and its place on
// the runlist free again.
func TestAnUnstartedChannelIsListedOnlyByStart(t *testing.T) {
	d := openWith(t, device.Config{MemorySize: 8 << 20, ContextSize: 4096}, Config{})
	ctx := d.DefaultContext()
	refuse := errors.New("not yet")
	var starts int
	opts := ChannelOptions{Priority: abi.PriorityNormal, Start: func(abi.Channel) error {
		starts++
		if starts == 1 {
			return refuse
		}
		return nil
	}}
	ch := newChannel(t, d, abi.EngineCopy, ctx, opts)
	listed := func() bool { return slices.Contains(d.liveChannels(), ch) }
	assert.False(t, listed(), "an unstarted channel among the driver's live channels")
	assert.ErrorIs(t, ch.Submit(abi.Command{Op: abi.OpNop}), ErrNotStarted, "Submit on an unstarted channel")

	assert.ErrorIs(t, ch.Start(), refuse, "Start whose option refuses")
	assert.False(t, listed(), "a channel whose Start was refused among the driver's live channels")
	require.NoError(t, ch.Start(), "Start again")
	assert.True(t, listed(), "a started channel among the driver's live channels")
	require.NoError(t, ch.Submit(abi.Command{Op: abi.OpNop}), "Submit on the started channel")
	assert.ErrorIs(t, ch.Start(), ErrRunlist, "a second Start of a started channel")
	assert.Equal(t, 2, starts, "calls of the Start option")

	// An unstarted channel closes without its engine, and gives back its
	// id; a Start after the close is refused.
	unstarted, err := d.NewChannel(abi.EngineCopy, ctx, opts)
	require.NoError(t, err)
	id := unstarted.ID()
	require.NoError(t, unstarted.Close(), "closing an unstarted channel")
	assert.ErrorIs(t, unstarted.Start(), ErrClosed, "Start of a closed channel")
	again := newChannel(t, d, abi.EngineCopy, ctx, ChannelOptions{Priority: abi.PriorityNormal})
	assert.Equal(t, id, again.ID(), "the id of a closed unstarted channel, opened again")
	require.NoError(t, again.Submit(abi.Command{Op: abi.OpNop}), "Submit on the reopened id")
}
