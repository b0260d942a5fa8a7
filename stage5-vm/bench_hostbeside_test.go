package softgpu_test

import (
	"hash/crc32"
	"sync/atomic"
	"testing"

	softgpu "softgpu/stage5-vm"
)

// BenchmarkHostBeside is the application's own work — CRC-32s of a 64 KiB
// buffer, which involve no device at all, on as many goroutines as the
// process has cores (b.RunParallel), as an application that uses the
// machine would — with no device open (device=none) and with a device open
// and idle beside it (device=idle). The difference is what an idle device
// costs the application it serves: engines that spin take cores the host
// would have used. ns/op is per checksum, across all goroutines.
func BenchmarkHostBeside(b *testing.B) {
	for _, open := range []bool{false, true} {
		name := "device=none"
		if open {
			name = "device=idle"
		}
		b.Run(name, func(b *testing.B) {
			if open {
				g := openBench(b, softgpu.Config{})
				defer g.Close()
			}
			b.SetBytes(64 << 10)
			var total atomic.Uint32
			m := startMeter()
			b.RunParallel(func(pb *testing.PB) {
				buf := touched(64 << 10)
				produce(buf, 0x5a)
				var sum uint32
				for pb.Next() {
					sum += crc32.ChecksumIEEE(buf)
				}
				total.Add(sum)
			})
			m.report(b)
			sink += uint64(total.Load())
		})
	}
}
