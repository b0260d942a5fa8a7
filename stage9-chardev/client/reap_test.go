package client_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/server"
)

// TestBatchesNobodyWaitsForAreReapedAcrossTheBoundary: on a ring of eight,
// three goroutines submit batches and do not wait for them while two others
// Submit; every slot a submitter needs held a batch command a lap before,
// so the submitters reap each other's batches (reapPassed) through the
// completion ring the daemon writes. At the end every batch must read as
// having succeeded. Under -race this is also the test of the order between
// a batch submitter's store of its slot's owner entry and the reaper's
// load of it: the completion that lies between them is written by the
// daemon, which Go's memory model does not see, so only the entry itself
// can order them (driver/nolock.go, reapPassed).
func TestBatchesNobodyWaitsForAreReapedAcrossTheBoundary(t *testing.T) {
	s := serve(t, server.Config{Device: device.Config{RingSize: 8}})
	g, err := client.DialConfig(client.Config{Node: s.Node(), Wait: driver.WaitPoll})
	require.NoError(t, err)
	defer g.Close()
	ch, err := g.NewChannel(client.Copy, client.ChannelOptions{})
	require.NoError(t, err)
	defer ch.Close()
	const rounds = 2000
	pendings := make([][]*client.Pending, 3)
	var wg sync.WaitGroup
	for k := range pendings {
		wg.Go(func() {
			for range rounds {
				b := ch.NewBatch()
				b.Nop()
				b.Nop()
				b.Nop()
				p, err := b.Submit()
				if !assert.NoError(t, err) {
					return
				}
				pendings[k] = append(pendings[k], p)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range rounds {
				if !assert.NoError(t, ch.Nop()) {
					return
				}
			}
		})
	}
	wg.Wait()
	for k, ps := range pendings {
		for n, p := range ps {
			require.NoError(t, p.Wait(), "batch %d of submitter %d", n, k)
		}
	}
}
