package uapi

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestSizeofPinned pins each struct's size as the compiler sees it, beside
// the reflect-based layout test: the numbers a C programmer would check
// with sizeof.
func TestSizeofPinned(t *testing.T) {
	tests := []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"Header", unsafe.Sizeof(Header{}), 16},
		{"Version", unsafe.Sizeof(Version{}), 64},
		{"Attach", unsafe.Sizeof(Attach{}), 24},
		{"ChannelOpen", unsafe.Sizeof(ChannelOpen{}), 40},
		{"ChannelClose", unsafe.Sizeof(ChannelClose{}), 8},
		{"Alloc", unsafe.Sizeof(Alloc{}), 24},
		{"Free", unsafe.Sizeof(Free{}), 8},
		{"HostRegister", unsafe.Sizeof(HostRegister{}), 24},
		{"HostUnregister", unsafe.Sizeof(HostUnregister{}), 8},
		{"Info", unsafe.Sizeof(Info{}), 136},
		{"EngineInfo", unsafe.Sizeof(EngineInfo{}), 40},
		{"ClientInfo", unsafe.Sizeof(ClientInfo{}), 48},
		{"ManagedAlloc", unsafe.Sizeof(ManagedAlloc{}), 24},
		{"ManagedSync", unsafe.Sizeof(ManagedSync{}), 8},
		{"ManagedPrefetch", unsafe.Sizeof(ManagedPrefetch{}), 32},
		{"ManagedFree", unsafe.Sizeof(ManagedFree{}), 8},
		{"ManagedResident", unsafe.Sizeof(ManagedResident{}), 16},
		{"ClientQuota", unsafe.Sizeof(ClientQuota{}), 144},
		{"ManagedPager", unsafe.Sizeof(ManagedPager{}), 32},
		{"ChannelStart", unsafe.Sizeof(ChannelStart{}), 8},
		{"Pools", unsafe.Sizeof(Pools{}), 32},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got, "unsafe.Sizeof(%s{})", tt.name)
	}
	assert.Equal(t, uintptr(56), unsafe.Offsetof(Info{}.Engines), "unsafe.Offsetof(Info{}.Engines)")
}
