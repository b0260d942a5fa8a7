// Attack: flood the node with cheap calls from as many connections as the
// uid may hold (each a VERSION then INFO calls, pipelined 16 deep), to see
// whether a well-behaved client's dial, calls and round trips keep their
// bound.
//
// usage: flood -node PATH [-conns N] [-d DURATION]
package main

import (
	"flag"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"softgpu/stage9-chardev/uapi"
)

func main() {
	node := flag.String("node", "", "the node")
	conns := flag.Int("conns", 60, "connections")
	d := flag.Duration("d", 10*time.Second, "how long")
	flag.Parse()
	var calls atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(*d)
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sock, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: *node, Net: "unixpacket"})
			if err != nil {
				return
			}
			defer sock.Close()
			ver := uapi.EncodeCall(1, &uapi.Version{Major: uapi.VersionMajor, Minor: uapi.VersionMinor})
			sock.Write(ver)
			buf := make([]byte, 1024)
			sock.Read(buf)
			info := uapi.EncodeCall(2, &uapi.Info{})
			for time.Now().Before(end) {
				for k := 0; k < 16; k++ {
					sock.Write(info)
				}
				for k := 0; k < 16; k++ {
					sock.Read(buf)
				}
				calls.Add(16)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d calls from %d connections in %v\n", calls.Load(), *conns, *d)
}
