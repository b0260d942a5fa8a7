// A well-behaved client of another uid: ALLOC 1 MiB and HOST_REGISTER
// one page, and say what the daemon answered.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
	"unsafe"

	"softgpu/stage9-chardev/client"
)

func main() {
	node := flag.String("node", "", "the node")
	size := flag.Uint64("alloc", 1<<20, "bytes to ALLOC")
	loop := flag.Int("loop", 0, "if > 0: ALLOC and FREE this many times in a row (a well-behaved app reusing a buffer), and report the first failure")
	fills := flag.Duration("fills", 0, "if > 0: for this long, FILL a host page with a new value and check every byte; report the slowest and any wrong byte")
	adds := flag.Duration("adds", 0, "if > 0: for this long, ADD32 1 to every word of a 4 MiB host buffer and check every word after each (an ADD32 replayed or half-done shows)")
	flag.Parse()
	g, err := client.Dial(*node)
	if err != nil {
		fmt.Println("victim Dial:", err)
		os.Exit(1)
	}
	defer g.Close()
	status := 0
	if *adds > 0 {
		const size = 4 << 20
		h, err := g.HostAlloc(size)
		if err != nil {
			fmt.Println("victim HostAlloc:", err)
			os.Exit(1)
		}
		clear(h.Bytes())
		words := unsafe.Slice((*uint32)(unsafe.Pointer(&h.Bytes()[0])), size/4)
		var worst time.Duration
		n, bad, failed := 0, 0, 0
		for end := time.Now().Add(*adds); time.Now().Before(end); {
			t0 := time.Now()
			if err := g.Add32(h.Ptr(), size, 1); err != nil {
				failed++
				fmt.Printf("victim ADD32 %d: %v\n", n+1, err)
				break
			}
			n++
			worst = max(worst, time.Since(t0))
			for i, w := range words {
				if w != uint32(n) {
					bad++
					fmt.Printf("victim ADD32 %d: word %d reads %d, want %d\n", n, i, w, n)
					break
				}
			}
			if bad > 0 {
				break
			}
		}
		fmt.Printf("victim adds: %d ADD32s of 4 MiB, %d wrong, %d failed, slowest %v\n", n, bad, failed, worst.Round(time.Microsecond))
		if bad+failed > 0 {
			status = 1
		}
	}
	if *fills > 0 {
		h, err := g.HostAlloc(4096)
		if err != nil {
			fmt.Println("victim HostAlloc:", err)
			os.Exit(1)
		}
		var worst time.Duration
		n, bad := 0, 0
		for end := time.Now().Add(*fills); time.Now().Before(end); n++ {
			v := byte(n*7 + 1)
			t0 := time.Now()
			if err := g.Fill(h.Ptr(), 4096, v); err != nil {
				fmt.Printf("victim FILL %d: %v\n", n, err)
				os.Exit(1)
			}
			worst = max(worst, time.Since(t0))
			for i, b := range h.Bytes() {
				if b != v {
					bad++
					fmt.Printf("victim FILL %d: byte %d reads %#x, want %#x\n", n, i, b, v)
					break
				}
			}
		}
		fmt.Printf("victim fills: %d round trips, %d wrong, slowest %v\n", n, bad, worst.Round(time.Microsecond))
		if bad > 0 {
			status = 1
		}
	}
	if *loop > 0 {
		t0 := time.Now()
		for i := 0; i < *loop; i++ {
			p, err := g.Alloc(*size)
			if err != nil {
				fmt.Printf("victim ALLOC/FREE loop: ALLOC %d of %d (%d bytes each) failed after %v: %v\n", i+1, *loop, *size, time.Since(t0).Round(time.Millisecond), err)
				os.Exit(1)
			}
			if err := g.Free(p); err != nil {
				fmt.Printf("victim FREE %d: %v\n", i+1, err)
				os.Exit(1)
			}
		}
		fmt.Printf("victim ALLOC/FREE loop: %d cycles of %d bytes ok in %v\n", *loop, *size, time.Since(t0).Round(time.Millisecond))
	}
	t0 := time.Now()
	p, err := g.Alloc(*size)
	fmt.Printf("victim ALLOC %d: err=%v (%v)\n", *size, err, time.Since(t0).Round(time.Millisecond))
	if err != nil {
		status = 1
	} else {
		g.Free(p)
	}
	t0 = time.Now()
	h, err := g.HostAlloc(4096)
	fmt.Printf("victim HOST_REGISTER 4096: err=%v (%v)\n", err, time.Since(t0).Round(time.Millisecond))
	if err != nil {
		status = 1
	} else {
		g.HostFree(h)
	}
	os.Exit(status)
}
