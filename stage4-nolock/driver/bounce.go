package driver

import (
	"fmt"
	"sync"

	"softgpu/stage4-nolock/abi"
)

// Staged copies: how CopyToDevice and CopyFromDevice move an ordinary Go
// slice, which the copy engine cannot reach. A pageable slice has no place
// in the DMA window: the kernel may page it out or move it, and the Go
// runtime may free it the moment the caller drops it. So the driver keeps a
// ring of pinned bounce buffers — one HostAlloc region, cut into
// BounceBuffers chunks of BounceChunk bytes — and moves the slice through
// it a chunk at a time: the CPU copies between the slice and a buffer, the
// copy engine between the buffer and device memory. The two copies of
// neighbouring chunks overlap.
//
// Host to device (stageToDevice), with buffers b0, b1, ...:
//
//	host                                   copy engine
//	CPU copy chunk 0 → b0
//	submit COPY b0 → dst ───────────────► COPY chunk 0
//	CPU copy chunk 1 → b1                     (at the same time)
//	submit COPY b1 → dst+chunk ─────────► COPY chunk 1
//	...
//	chunk n: wait for the fence of the COPY that last used
//	         b(n mod count), then CPU copy chunk n over it
//
// Device to host (stageFromDevice) runs the other way: the host first
// submits a COPY into every buffer, then for each chunk in turn waits for
// its COPY, copies the buffer out with the CPU, and submits the COPY of the
// chunk count places further on into the buffer it just emptied.
//
// A buffer's pending COPY is the only thing that may touch it besides the
// host, and the host touches it only after that COPY has completed: that
// is the whole ownership rule.
//
// One staged copy uses the ring at a time (bounceRing.mu); copies from and
// to pinned memory do not use it at all (see copy.go).

// DefaultBounceChunk and DefaultBounceBuffers size the bounce ring of a
// zero Config: 4 buffers of 256 KiB, 1 MiB of pinned memory. A chunk of
// 256 KiB is long enough that the per-command cost is small beside its
// copy (in the copies record at 885b3ad, stage 3, a pinned 4 KiB COPY and
// its wait took 0.59 µs to the device and 1.07 µs from it, at the median,
// against about 10 µs for 256 KiB at the engine's 26 GB/s), and short
// enough to keep the
// CPU and the engine busy together on a copy of a megabyte. (Where the
// engine shares two cores with the host, as on the 2-vCPU development
// machine, handing a buffer from one core's cache to the other's costs
// more than either copy: a staged 64 KiB copy took about 10 µs there,
// against 1.2 µs for a memmove.)
const (
	DefaultBounceChunk   = 256 << 10
	DefaultBounceBuffers = 4

	maxBounceChunk   = 64 << 20
	maxBounceBuffers = 64
)

// bounceRing is the driver's ring of pinned bounce buffers.
type bounceRing struct {
	chunk uint64 // bytes per buffer
	count int    // buffers

	// mu is held by the one staged copy using the ring, for its whole
	// length, and by Close while it unmaps the ring.
	mu       sync.Mutex
	pinned   *Pinned    // count*chunk bytes; nil once Close has freed it
	inFlight []*Pending // inFlight[i]: the COPY that last used buffer i, not yet waited for
}

// checkBounce fills in the bounce ring's defaults and refuses sizes it
// cannot have.
func checkBounce(cfg *Config) error {
	if cfg.BounceChunk == 0 {
		cfg.BounceChunk = DefaultBounceChunk
	}
	if cfg.BounceBuffers == 0 {
		cfg.BounceBuffers = DefaultBounceBuffers
	}
	if cfg.BounceChunk > maxBounceChunk {
		return fmt.Errorf("%w: BounceChunk %d is over %d", ErrConfig, cfg.BounceChunk, maxBounceChunk)
	}
	if cfg.BounceBuffers < 0 || cfg.BounceBuffers > maxBounceBuffers {
		return fmt.Errorf("%w: BounceBuffers %d is not in 1 to %d", ErrConfig, cfg.BounceBuffers, maxBounceBuffers)
	}
	return nil
}

// initBounce allocates the ring, as cfg (checked) sizes it.
func (d *Driver) initBounce(cfg Config) error {
	r := &d.bounce
	r.chunk, r.count = cfg.BounceChunk, cfg.BounceBuffers
	p, err := d.HostAlloc(r.chunk * uint64(r.count))
	if err != nil {
		return fmt.Errorf("softgpu: allocating the bounce buffers: %w", err)
	}
	r.pinned, r.inFlight = p, make([]*Pending, r.count)
	return nil
}

// closeBounce frees the ring. Close calls it after the device has stopped,
// so no COPY is left to touch a buffer; taking mu waits for a staged copy
// that is still returning.
func (d *Driver) closeBounce() {
	r := &d.bounce
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned != nil {
		d.HostFree(r.pinned)
		r.pinned = nil
	}
}

// buffer returns bounce buffer i and its bus address.
func (r *bounceRing) buffer(i int) ([]byte, uint64) {
	off := uint64(i) * r.chunk
	return r.pinned.Bytes()[off : off+r.chunk], r.pinned.Bus() + off
}

// ANCHOR: stagein

// stageToDevice copies src to device memory at dst through the bounce ring.
func (d *Driver) stageToDevice(dst uint64, src []byte) error {
	r := &d.bounce
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned == nil {
		return ErrClosed
	}
	var err error
	for i, off := 0, uint64(0); off < uint64(len(src)); i++ {
		b := i % r.count
		if err = r.reuse(b); err != nil {
			break
		}
		buf, bus := r.buffer(b)
		n := uint64(copy(buf, src[off:])) // the CPU's copy of chunk i, while the engine copies chunk i-1
		if r.inFlight[b], err = d.copyAsync(bus, dst+off, n); err != nil {
			break
		}
		off += n
	}
	return r.drain(err)
}

// ANCHOR_END: stagein

// ANCHOR: stageout

// stageFromDevice copies device memory at src into dst through the bounce
// ring.
func (d *Driver) stageFromDevice(dst []byte, src uint64) error {
	r := &d.bounce
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pinned == nil {
		return ErrClosed
	}
	chunks := (uint64(len(dst)) + r.chunk - 1) / r.chunk
	// submit starts the engine's copy of chunk i into buffer i mod count.
	submit := func(i uint64) (err error) {
		b := int(i % uint64(r.count))
		off := i * r.chunk
		_, bus := r.buffer(b)
		r.inFlight[b], err = d.copyAsync(src+off, bus, min(r.chunk, uint64(len(dst))-off))
		return err
	}
	var err error
	for i := uint64(0); i < min(chunks, uint64(r.count)) && err == nil; i++ {
		err = submit(i)
	}
	for i := uint64(0); i < chunks && err == nil; i++ {
		b := int(i % uint64(r.count))
		if err = r.reuse(b); err != nil {
			break
		}
		buf, _ := r.buffer(b)
		copy(dst[i*r.chunk:], buf) // the CPU's copy of chunk i, while the engine copies the next ones
		if next := i + uint64(r.count); next < chunks {
			err = submit(next)
		}
	}
	return r.drain(err)
}

// ANCHOR_END: stageout

// reuse waits until the engine is done with buffer b: the COPY that last
// used it, if any, has completed — its batch's fence has signalled, waited
// for in the driver's wait mode (fence.go). Its error is that COPY's.
func (r *bounceRing) reuse(b int) error {
	p := r.inFlight[b]
	if p == nil {
		return nil
	}
	r.inFlight[b] = nil
	return p.Wait()
}

// drain waits for every COPY still using a buffer, so the next staged copy
// starts with the ring idle, and returns err, or if err is nil the first
// error among those COPYs. It runs after an error too: the buffers must be
// quiet before anyone writes them again.
func (r *bounceRing) drain(err error) error {
	for b := range r.inFlight {
		if e := r.reuse(b); err == nil {
			err = e
		}
	}
	return err
}

// copyAsync submits one COPY on the copy engine and returns without
// waiting for it.
func (d *Driver) copyAsync(src, dst, size uint64) (*Pending, error) {
	return d.SubmitBatch(abi.EngineCopy, []abi.Command{{Op: abi.OpCopy, Src: src, Dst: dst, Size: size}})
}
