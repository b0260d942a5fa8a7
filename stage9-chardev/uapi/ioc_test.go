package uapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIOCMatchesLinux checks IOC against request numbers computed by hand
// from asm-generic/ioctl.h, including DRM's own shapes.
func TestIOCMatchesLinux(t *testing.T) {
	tests := []struct {
		name               string
		dir, typ, nr, size uint32
		want               uint32
	}{
		{"_IOWR('d', 0x00, 64 bytes)", IocRead | IocWrite, 'd', 0x00, 64, 0xC0406400}, // DRM_IOCTL_VERSION's shape on LP64
		{"_IO('d', 0x0f)", IocNone, 'd', 0x0f, 0, 0x0000640F},
		{"_IOW('d', 0x09, 8 bytes)", IocWrite, 'd', 0x09, 8, 0x40086409}, // DRM_IOCTL_GEM_CLOSE
		{"_IOR('G', 0xff, max size)", IocRead, 'G', 0xff, 1<<14 - 1, 0xBFFF47FF},
		{"all zero", IocNone, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		got := IOC(tt.dir, tt.typ, tt.nr, tt.size)
		assert.Equal(t, tt.want, got, "IOC(%s)", tt.name)
		if Dir(got) != tt.dir || Type(got) != tt.typ || Nr(got) != tt.nr || Size(got) != tt.size {
			t.Errorf("decode %#08x = dir %d type %#x nr %#x size %d; want %d %#x %#x %d",
				got, Dir(got), Type(got), Nr(got), Size(got), tt.dir, tt.typ, tt.nr, tt.size)
		}
	}
	if IO(1) != IOC(IocNone, 'G', 1, 0) || IOR(1, 8) != IOC(IocRead, 'G', 1, 8) ||
		IOW(1, 8) != IOC(IocWrite, 'G', 1, 8) || IOWR(1, 8) != IOC(IocRead|IocWrite, 'G', 1, 8) {
		t.Errorf("IO/IOR/IOW/IOWR do not build IOC(dir, 'G', nr, size)")
	}
}

// TestIOCPanicsOnOverflow: a part too wide for its bits is a bug in a
// request table, caught when the number is built.
func TestIOCPanicsOnOverflow(t *testing.T) {
	tests := []struct {
		name               string
		dir, typ, nr, size uint32
	}{
		{"dir", 4, 'G', 0, 0},
		{"type", 0, 0x100, 0, 0},
		{"nr", 0, 'G', 0x100, 0},
		{"size", 0, 'G', 0, 1 << 14},
	}
	for _, tt := range tests {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("IOC with %s too wide did not panic", tt.name)
				}
			}()
			IOC(tt.dir, tt.typ, tt.nr, tt.size)
		}()
	}
}

// TestRequestNumbers pins every call's request number, and recomputes it
// from its parts and its struct's size: a struct that changes size, or a
// call that changes direction, fails here.
func TestRequestNumbers(t *testing.T) {
	tests := []struct {
		name string
		req  uint32
		dir  uint32
		nr   uint32
		size uint32
		want uint32
	}{
		{"VERSION", IoctlVersion, IocRead | IocWrite, 0x00, 64, 0xC0404700},
		{"ATTACH", IoctlAttach, IocRead, 0x01, 24, 0x80184701},
		{"CHANNEL_OPEN", IoctlChannelOpen, IocRead | IocWrite, 0x02, 40, 0xC0284702},
		{"CHANNEL_CLOSE", IoctlChannelClose, IocWrite, 0x03, 8, 0x40084703},
		{"ALLOC", IoctlAlloc, IocRead | IocWrite, 0x04, 24, 0xC0184704},
		{"FREE", IoctlFree, IocWrite, 0x05, 8, 0x40084705},
		{"HOST_REGISTER", IoctlHostRegister, IocRead | IocWrite, 0x06, 24, 0xC0184706},
		{"HOST_UNREGISTER", IoctlHostUnregister, IocWrite, 0x07, 8, 0x40084707},
		{"INFO", IoctlInfo, IocRead, 0x08, 136, 0x80884708},
		{"CLIENT_INFO", IoctlClientInfo, IocRead | IocWrite, 0x09, 48, 0xC0304709},
		{"MANAGED_ALLOC", IoctlManagedAlloc, IocRead | IocWrite, 0x0a, 24, 0xC018470A},
		{"MANAGED_SYNC", IoctlManagedSync, IocWrite, 0x0b, 8, 0x4008470B},
		{"MANAGED_PREFETCH", IoctlManagedPrefetch, IocWrite, 0x0c, 32, 0x4020470C},
		{"MANAGED_FREE", IoctlManagedFree, IocWrite, 0x0d, 8, 0x4008470D},
		{"MANAGED_RESIDENT", IoctlManagedResident, IocRead | IocWrite, 0x0e, 16, 0xC010470E},
		{"CLIENT_QUOTA", IoctlClientQuota, IocRead | IocWrite, 0x0f, 144, 0xC090470F},
		{"MANAGED_PAGER", IoctlManagedPager, IocWrite, 0x10, 32, 0x40204710},
		{"CHANNEL_START", IoctlChannelStart, IocWrite, 0x11, 8, 0x40084711},
	}
	assert.Equal(t, len(Calls), len(tests), "%d request numbers pinned; Calls has %d", len(tests), len(Calls))
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.req, "%s", tt.name)
		assert.Equal(t, tt.req, IOC(tt.dir, Magic, tt.nr, tt.size), "%s; IOC(dir %d, 'G', %#02x, %d)", tt.name, tt.dir, tt.nr, tt.size)
		c, err := Lookup(tt.req)
		if !assert.NoError(t, err, "Lookup(%s)", tt.name) {
			continue
		}
		assert.Equal(t, tt.name, c.Name, "Lookup(%#08x).Name", tt.req)
		if got := uint32(argSize(c.New())); got != tt.size {
			t.Errorf("%s: argument struct is %d bytes; want %d", tt.name, got, tt.size)
		}
	}
}
