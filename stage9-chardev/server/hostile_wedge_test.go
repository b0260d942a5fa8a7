package server_test

import (
	"testing"
	"time"

	"softgpu/stage9-chardev/client"
)

// Item 6 of the threat model: no call blocks the daemon, and no command
// holds an engine for good. A DELAY of 2^62 cycles is a valid command;
// softgpud's default watchdog stops it and faults its channel, while
// every other client's channels on the same engines keep their latency.

func TestANeverEndingCommandIsStoppedAndOthersKeepTheirLatency(t *testing.T) {
	d := startDaemon(t) // softgpud's defaults, its watchdog among them
	hog, err := client.Dial(d.node)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	var pending []interface{ Wait() error }
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := hog.NewBatch(e)
		b.Delay(1 << 62)
		p, err := b.Submit()
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	d.stillServes(t, "while a DELAY of 2^62 cycles runs on each engine")
	for i, p := range pending {
		done := make(chan error, 1)
		go func() { done <- p.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("the hog's DELAY of 2^62 cycles on engine %d completed without error", i)
			}
		case <-time.After(patience):
			t.Fatalf("the hog's DELAY of 2^62 cycles on engine %d still runs after %v: softgpud has no watchdog", i, patience)
		}
	}
	d.stillServes(t, "after the hog's channels were faulted")
	d.terminate(t, patience)
}
