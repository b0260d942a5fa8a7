package client

import (
	"fmt"

	"golang.org/x/sys/unix"

	"softgpu/stage9-chardev/uapi"
)

// HostBuffer is host memory the device reaches by DMA, as
// softgpu.HostBuffer is in-process. Across the boundary it is a memfd:
// the client creates it, seals it against shrinking, maps it, and passes
// it to the daemon with HOST_REGISTER — the idea of vhost-user's memory
// table, where a guest's memory reaches the device process the same way.
// The daemon maps the same pages, pins them, and maps them into the
// client's context; Ptr is where.
type HostBuffer struct {
	mapping []byte // whole pages: what munmap is given
	bytes   []byte
	va      uint64
}

// Bytes returns the buffer's memory. It must not be touched after
// HostFree.
func (h *HostBuffer) Bytes() []byte { return h.bytes }

// Ptr returns the buffer's address in the client's context: any command
// may name it.
func (h *HostBuffer) Ptr() Ptr { return Ptr(h.va) }

func (h *HostBuffer) unmap() {
	if h.mapping != nil {
		unix.Munmap(h.mapping)
		h.mapping, h.bytes = nil, nil
	}
}

// HostAlloc returns size bytes of host memory registered with the daemon.
func (g *GPU) HostAlloc(size uint64) (*HostBuffer, error) {
	if size == 0 {
		return nil, fmt.Errorf("%w: HostAlloc of 0 bytes", uapi.ErrInval)
	}
	length := roundPage(size)
	fd, mapping, err := sealedMemfd("softgpu-host", length)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) // the mappings, ours and the daemon's, keep the pages
	reg := uapi.HostRegister{Size: length}
	if _, err := g.call(&reg, []int{fd}); err != nil {
		unix.Munmap(mapping)
		return nil, g.err(err)
	}
	h := &HostBuffer{mapping: mapping, bytes: mapping[:size:size], va: reg.VA}
	g.hostMu.Lock()
	g.hosts = append(g.hosts, h)
	g.hostMu.Unlock()
	return h, nil
}

// HostFree gives a buffer back: the daemon waits for any command copying
// from it, then unmaps it from the context; then the client unmaps it.
func (g *GPU) HostFree(h *HostBuffer) error {
	g.hostMu.Lock()
	i := -1
	for k, x := range g.hosts {
		if x == h {
			i = k
		}
	}
	if i >= 0 {
		g.hosts = append(g.hosts[:i:i], g.hosts[i+1:]...)
	}
	g.hostMu.Unlock()
	if i < 0 {
		return fmt.Errorf("%w: HostFree of a buffer that is not allocated", uapi.ErrNoEntry)
	}
	_, err := g.call(&uapi.HostUnregister{VA: h.va}, nil)
	h.unmap()
	return g.err(err)
}

// Write copies src into device memory at dst. A src inside one of the
// client's HostBuffers is copied by one command from there; any other
// slice goes through the staging buffer a chunk at a time.
func (g *GPU) Write(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if va, ok := g.hostVA(src); ok {
		return g.Copy(dst, va, uint64(len(src)))
	}
	return g.staged(len(src), func(stage []byte, off uint64) error {
		n := copy(stage, src[off:])
		return g.Copy(dst+Ptr(off), g.stage.Ptr(), uint64(n))
	})
}

// Read copies device memory at src into dst, as Write does the other way.
func (g *GPU) Read(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	if va, ok := g.hostVA(dst); ok {
		return g.Copy(va, src, uint64(len(dst)))
	}
	return g.staged(len(dst), func(stage []byte, off uint64) error {
		n := min(uint64(len(stage)), uint64(len(dst))-off)
		if err := g.Copy(g.stage.Ptr(), src+Ptr(off), n); err != nil {
			return err
		}
		copy(dst[off:], stage[:n])
		return nil
	})
}

// staged runs chunk for each staging-buffer-sized piece of n bytes, with
// the staging buffer held (it is made on first use).
func (g *GPU) staged(n int, chunk func(stage []byte, off uint64) error) error {
	g.stageMu.Lock()
	defer g.stageMu.Unlock()
	if g.stage == nil {
		h, err := g.HostAlloc(g.staging)
		if err != nil {
			return err
		}
		g.stage = h
	}
	for off := uint64(0); off < uint64(n); off += uint64(len(g.stage.bytes)) {
		if err := chunk(g.stage.bytes, off); err != nil {
			return err
		}
	}
	return nil
}

// hostVA returns the context address of b if b lies inside one of the
// client's HostBuffers.
func (g *GPU) hostVA(b []byte) (Ptr, bool) {
	start := addressOf(b)
	g.hostMu.Lock()
	defer g.hostMu.Unlock()
	for _, h := range g.hosts {
		if len(h.bytes) == 0 {
			continue
		}
		base := addressOf(h.bytes)
		if start >= base && start+uintptr(len(b)) <= base+uintptr(len(h.bytes)) {
			return Ptr(h.va + uint64(start-base)), true
		}
	}
	return 0, false
}
