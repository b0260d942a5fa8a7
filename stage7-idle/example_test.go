package softgpu_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log"

	softgpu "softgpu/stage7-idle"
	"softgpu/stage7-idle/abi"
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

// ExampleGPU_NewBatch queues several commands on the copy engine and rings
// its doorbell once for all of them.
func ExampleGPU_NewBatch() {
	gpu, err := softgpu.Open(softgpu.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer gpu.Close()

	src, _ := gpu.Alloc(64)
	dst, _ := gpu.Alloc(64)
	batch := gpu.NewBatch(softgpu.Copy)
	batch.Fill(src, 64, 'a')
	batch.Fill(src+32, 32, 'b')
	batch.Copy(dst, src, 64)
	batch.Fill(dst, 1<<40, 'c') // far too large: fails alone
	pending, err := batch.Submit()
	if err != nil {
		log.Fatal(err)
	}
	err = pending.Wait()
	fmt.Println(errors.Is(err, abi.StatusOutOfRange), pending.Err(2)) // the fill failed; the copy before it did not
	// Counted before Read, which rings a doorbell of its own since stage 3.
	bells := gpu.Doorbells()

	out := make([]byte, 64)
	if err := gpu.Read(out, dst); err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out[28:36]), bells)
	// Output:
	// true <nil>
	// aaaabbbb 1
}
