package uapi

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"softgpu/stage9-chardev/abi"
)

// argSize returns the size of arg's packed encoding.
func argSize(arg Arg) int {
	return walk(reflect.ValueOf(arg).Elem(), 0, 0, func(int, role, reflect.Value) {})
}

// goField is a scalar field found through the Go compiler's layout:
// reflect's Offset and Size are unsafe.Offsetof and unsafe.Sizeof.
type goField struct {
	name   string
	offset uintptr
	size   uintptr
}

// goFields lists the scalar fields of t, arrays unrolled, at the offsets
// the compiler gave them.
func goFields(t reflect.Type, base uintptr, name string) []goField {
	switch t.Kind() {
	case reflect.Uint32, reflect.Uint64:
		return []goField{{name, base, t.Size()}}
	case reflect.Array:
		var fs []goField
		for i := range t.Len() {
			fs = append(fs, goFields(t.Elem(), base+uintptr(i)*t.Elem().Size(), fmt.Sprintf("%s[%d]", name, i))...)
		}
		return fs
	case reflect.Struct:
		var fs []goField
		for i := range t.NumField() {
			f := t.Field(i)
			fs = append(fs, goFields(f.Type, base+f.Offset, name+"."+f.Name)...)
		}
		return fs
	}
	panic(fmt.Sprintf("goFields: %v", t))
}

// TestLayoutHasNoPadding proves, for every argument struct, that each
// field's offset in the packed encoding is its offset in Go's natural
// layout, and that the struct ends where its last field does: so the
// encoding is the memory image, in Go and in C.
func TestLayoutHasNoPadding(t *testing.T) {
	for _, c := range Calls {
		arg := c.New()
		typ := reflect.TypeOf(arg).Elem()
		want := goFields(typ, 0, typ.Name())
		i := 0
		end := walk(reflect.ValueOf(arg).Elem(), 0, 0, func(off int, _ role, f reflect.Value) {
			if i >= len(want) {
				t.Fatalf("%s: encoding has more fields than the struct", typ.Name())
			}
			if uintptr(off) != want[i].offset || f.Type().Size() != want[i].size {
				t.Errorf("%s: encoded at %d (%d bytes); Go puts it at %d (%d bytes)",
					want[i].name, off, f.Type().Size(), want[i].offset, want[i].size)
			}
			assert.Equal(t, uintptr(0), uintptr(off)%want[i].size, "%s at %d is not naturally aligned", want[i].name, off)
			i++
		})
		assert.Equal(t, len(want), i, "%s: encoding has %d fields; the struct %d", typ.Name(), i, len(want))
		assert.Equal(t, typ.Size(), uintptr(end), "%s: encoding is %d bytes; unsafe.Sizeof is %d", typ.Name(), end, typ.Size())
		assert.Equal(t, 0, end%8, "%s is %d bytes; not a multiple of 8", typ.Name(), end)
		assert.Equal(t, Size(c.Request), uint32(end), "%s: struct is %d bytes; Size(%#08x)", c.Name, end, c.Request)
	}
	assert.Equal(t, uintptr(HeaderSize), reflect.TypeOf(Header{}).Size(), "unsafe.Sizeof(Header{})")
}

// TestRolesMatchDirection: an IOW call's struct has nothing for the
// daemon to fill, an IOR call's nothing for the client to fill, and an
// IOWR call's both.
func TestRolesMatchDirection(t *testing.T) {
	for _, c := range Calls {
		count := map[role]int{}
		walk(reflect.ValueOf(c.New()).Elem(), 0, 0, func(_ int, r role, _ reflect.Value) { count[r]++ })
		in, out := count[roleIn]+count[roleInOut], count[roleOut]+count[roleInOut]
		var ok bool
		switch Dir(c.Request) {
		case IocWrite:
			ok = in > 0 && out == 0
		case IocRead:
			ok = in == 0 && out > 0
		case IocRead | IocWrite:
			ok = in > 0 && out > 0
		}
		if !ok {
			t.Errorf("%s: dir %d with %d in fields and %d out fields", c.Name, Dir(c.Request), in, out)
		}
	}
}

// TestCallsTable checks the table's own rules: rows in nr order, names
// unique, and the limits derived from it.
func TestCallsTable(t *testing.T) {
	names := map[string]bool{}
	maxMsg, maxFDs := 0, 0
	for i, c := range Calls {
		if Nr(c.Request) != uint32(i) || Type(c.Request) != Magic {
			t.Errorf("Calls[%d] is %s, request %#08x: nr %#x, type %#x; want nr %#x, type 'G'", i, c.Name, c.Request, Nr(c.Request), Type(c.Request), i)
		}
		if names[c.Name] {
			t.Errorf("two calls named %s", c.Name)
		}
		names[c.Name] = true
		assert.Equal(t, c.Request, c.New().Request(), "%s: its argument's Request()", c.Name)
		maxMsg = max(maxMsg, HeaderSize+c.CallSize(), HeaderSize+c.ReplySize())
		maxFDs = max(maxFDs, c.FDsIn, c.FDsOut)
	}
	if MaxMessage != maxMsg || MaxFDs != maxFDs {
		t.Errorf("MaxMessage, MaxFDs = %d, %d; the table needs %d, %d", MaxMessage, MaxFDs, maxMsg, maxFDs)
	}
	if InfoEngines != abi.NumEngines {
		t.Errorf("InfoEngines = %d; abi.NumEngines = %d", InfoEngines, abi.NumEngines)
	}
	fds := []struct {
		call     string
		position int
		count    int
	}{
		{"ATTACH", AttachFDIrq, Calls[Nr(IoctlAttach)].FDsOut},
		{"CHANNEL_OPEN", ChannelFDStatus, Calls[Nr(IoctlChannelOpen)].FDsOut},
		{"HOST_REGISTER", HostRegisterFDMemory, Calls[Nr(IoctlHostRegister)].FDsIn},
	}
	for _, f := range fds {
		assert.Equal(t, f.count-1, f.position, "%s: last descriptor at position %d; the call has %d", f.call, f.position, f.count)
	}
}

// fill sets every field of arg whose role is in roles to a distinct
// value, and returns arg.
func fill(arg Arg, roles ...role) Arg {
	n := uint64(0)
	walk(reflect.ValueOf(arg).Elem(), 0, 0, func(off int, r role, f reflect.Value) {
		for _, want := range roles {
			if r == want {
				n++
				// Distinct in every byte the field has, so a field
				// written at the wrong offset or width shows.
				x := 0x0101010101010101*n + uint64(off)<<8
				f.SetUint(x & (1<<(8*f.Type().Size()) - 1))
			}
		}
	})
	return arg
}

// TestArgEncoding writes every struct with a distinct value in every field
// and checks each value's bytes at its offset, then decodes it back.
func TestArgEncoding(t *testing.T) {
	all := []role{roleIn, roleOut, roleInOut, roleReserved}
	for _, c := range Calls {
		arg := fill(c.New(), all...)
		b := make([]byte, argSize(arg))
		for i := range b {
			b[i] = 0xee // stale bytes that encodeArg must overwrite
		}
		encodeArg(b, arg)
		want := goFields(reflect.TypeOf(arg).Elem(), 0, c.Name)
		i := 0
		walk(reflect.ValueOf(arg).Elem(), 0, 0, func(_ int, _ role, f reflect.Value) {
			off, got := want[i].offset, uint64(0)
			if want[i].size == 4 {
				got = uint64(binary.LittleEndian.Uint32(b[off:]))
			} else {
				got = binary.LittleEndian.Uint64(b[off:])
			}
			assert.Equal(t, f.Uint(), got, "%s at offset %d", want[i].name, off)
			i++
		})
		back := c.New()
		assert.NoError(t, decodeArg(b, back, false), "%s: decode of a reply", c.Name)
		if !reflect.DeepEqual(back, arg) {
			t.Errorf("%s: decode(encode(%+v)) = %+v", c.Name, arg, back)
		}
	}
}

// TestPoolsKeepsItsLayout: 2.3 gave Pools' reserved word a meaning,
// PageTables; the struct kept its size and every other field its offset,
// so a 2.2 client's Pools reads the same bytes.
func TestPoolsKeepsItsLayout(t *testing.T) {
	typ := reflect.TypeOf(Pools{})
	assert.Equal(t, uintptr(32), typ.Size(), "unsafe.Sizeof(Pools{})")
	for _, f := range []struct {
		name   string
		offset uintptr
	}{
		{"DeviceMemory", 0}, {"PinnedBytes", 8}, {"WindowEntries", 16},
		{"Contexts", 20}, {"Channels", 24}, {"PageTables", 28},
	} {
		got, ok := typ.FieldByName(f.name)
		if !ok {
			t.Errorf("Pools has no field %s", f.name)
			continue
		}
		assert.Equal(t, f.offset, got.Offset, "unsafe.Offsetof(Pools{}.%s)", f.name)
	}
	assert.Equal(t, 6, typ.NumField(), "Pools' fields")
}
