package softgpu_test

import (
	"encoding/binary"
	"os"
	"strconv"
	"testing"

	softgpu "softgpu/stage5-vm"
)

// The benchmarks of this stage, one file per family (bench_*_test.go).
// Their names are a contract (DESIGN.md §5): every later stage keeps each
// one, measuring the same user-visible operation with that stage's default
// configuration, so benchstat can compare stages row by row. Each reports
// "cores", the CPU the whole process burned per wall second.

// openBench opens a device for one benchmark, in the idle configuration
// and with the hybrid wait's poll budget the environment names, if any, and
// bracketed by the canary when the environment asks for it
// (canary_test.go). SOFTGPU_TRACE traces it, as it does any Open.
func openBench(b *testing.B, cfg softgpu.Config) *softgpu.GPU {
	b.Helper()
	pollBudgetFromEnv(b, &cfg)
	idleFromEnv(b, &cfg) // SOFTGPU_IDLE, SOFTGPU_IDLE_BUDGET (bench_idle_test.go)
	withCanary(b)
	g, err := softgpu.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

var engines = []softgpu.Engine{softgpu.Copy, softgpu.Compute}

// pollBudgetFromEnv sets cfg's poll budget — how long a hybrid wait polls
// before it blocks — from SOFTGPU_POLL_BUDGET (cycles), if it is set, so
// that a record can be made with waits that poll longer than the default
// 50 µs: a wait that outlasts its budget pays a wake-up, and a copy of a
// megabyte outlasts 50 µs here.
func pollBudgetFromEnv(b *testing.B, cfg *softgpu.Config) {
	b.Helper()
	v := os.Getenv("SOFTGPU_POLL_BUDGET")
	if v == "" {
		return
	}
	budget, err := strconv.ParseUint(v, 10, 64)
	if err != nil || budget == 0 {
		b.Fatalf("SOFTGPU_POLL_BUDGET=%q; want a positive number of cycles", v)
	}
	cfg.PollBudget = budget
}

// touched returns n bytes whose pages have all been written once, so that a
// benchmark times copies, not the kernel's first-touch page faults.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// produce writes every byte of b, as an application producing the data it
// is about to copy to the device: the lines end up dirty in this core's
// cache, where the copy has to take them from. It writes a 64-byte block
// of v, then doubles it, so it runs at memmove speed.
func produce(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	word := uint64(v) * 0x0101010101010101
	n := min(64, len(b))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], word)
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = v
	}
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}

// consume reads one word of every cache line of b, as an application
// using the data it has just copied from the device, and returns a sum so
// the reads cannot be optimised away.
func consume(b []byte) uint64 {
	var s uint64
	for i := 0; i+8 <= len(b); i += 64 {
		s += binary.LittleEndian.Uint64(b[i:])
	}
	return s
}

// sink keeps consume's results alive.
var sink uint64
