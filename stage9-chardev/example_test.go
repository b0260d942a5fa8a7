package softgpu_test

import (
	"encoding/binary"
	"fmt"
	"log"

	softgpu "softgpu/stage9-chardev"
)

// Example copies four numbers to the device, adds 10 to each with a kernel,
// sums them with another, and reads the sum back.
func Example() {
	gpu, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()

	buf, err := gpu.Alloc(16) // four uint32s
	if err != nil {
		log.Fatal(err)
	}
	sum, err := gpu.Alloc(8) // one uint64
	if err != nil {
		log.Fatal(err)
	}

	host := make([]byte, 16)
	for i, v := range []uint32{1, 2, 3, 4} {
		binary.LittleEndian.PutUint32(host[4*i:], v)
	}
	if err := gpu.Write(buf, host); err != nil { // host to device
		log.Fatal(err)
	}
	if err := gpu.Add32(buf, 16, 10); err != nil { // 11 12 13 14
		log.Fatal(err)
	}
	if err := gpu.Sum32(sum, buf, 16); err != nil {
		log.Fatal(err)
	}
	out := make([]byte, 8)
	if err := gpu.Read(out, sum); err != nil { // device to host
		log.Fatal(err)
	}
	fmt.Println(binary.LittleEndian.Uint64(out))
	// Output: 50
}
