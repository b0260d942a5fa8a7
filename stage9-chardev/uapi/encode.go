package uapi

import (
	"encoding/binary"
	"fmt"
	"reflect"
)

// The argument structs' encoding: each scalar field in order, little-endian,
// with nothing between them. It is written once, over reflection, for
// every struct: this is the control path, a few calls per channel or
// allocation, never a command. layout_test.go proves the packed offsets
// this walk computes equal the Go compiler's (and so the C compiler's).

// role says who writes a field: the `uapi` tag of args.go.
type role uint8

const (
	roleIn role = iota + 1
	roleOut
	roleInOut
	roleReserved
)

var roleTags = map[string]role{"in": roleIn, "out": roleOut, "inout": roleInOut, "reserved": roleReserved}

func (r role) String() string {
	for tag, x := range roleTags {
		if x == r {
			return tag
		}
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// fieldRole returns the role of struct field f inside a field whose role
// is outer (0 at the top): its own tag's, except that everything inside a
// reserved field is reserved. A field without a valid tag breaks the rule
// of args.go that every field says who writes it.
func fieldRole(f reflect.StructField, outer role) role {
	r, ok := roleTags[f.Tag.Get("uapi")]
	if !ok {
		panic(fmt.Sprintf("uapi: field %s has no valid uapi tag (%q)", f.Name, f.Tag.Get("uapi")))
	}
	if outer == roleReserved {
		return roleReserved
	}
	return r
}

// walk calls fn for each scalar field of v in order, with its offset in
// the packed encoding (starting at off) and its role, and returns the
// offset just past v. A field of a kind the ABI does not allow panics:
// the argument structs are this package's, so that is a bug here.
func walk(v reflect.Value, off int, r role, fn func(off int, r role, field reflect.Value)) int {
	switch v.Kind() {
	case reflect.Uint32:
		fn(off, r, v)
		return off + 4
	case reflect.Uint64:
		fn(off, r, v)
		return off + 8
	case reflect.Array:
		for i := range v.Len() {
			off = walk(v.Index(i), off, r, fn)
		}
		return off
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			off = walk(v.Field(i), off, fieldRole(t.Field(i), r), fn)
		}
		return off
	}
	panic(fmt.Sprintf("uapi: field of type %v: the ABI allows uint32, uint64, and arrays and structs of them", v.Type()))
}

// encodeArg writes arg into b, which is exactly the argument's size.
func encodeArg(b []byte, arg Arg) {
	walk(reflect.ValueOf(arg).Elem(), 0, 0, func(off int, _ role, f reflect.Value) {
		if f.Kind() == reflect.Uint32 {
			binary.LittleEndian.PutUint32(b[off:], uint32(f.Uint()))
		} else {
			binary.LittleEndian.PutUint64(b[off:], f.Uint())
		}
	})
}

// decodeArg reads arg from b, which is exactly the argument's size. If
// call is set, b is a call's payload, and an out or reserved field that is
// not zero is an error wrapping ErrInval.
func decodeArg(b []byte, arg Arg, call bool) error {
	var err error
	walk(reflect.ValueOf(arg).Elem(), 0, 0, func(off int, r role, f reflect.Value) {
		var x uint64
		if f.Kind() == reflect.Uint32 {
			x = uint64(binary.LittleEndian.Uint32(b[off:]))
		} else {
			x = binary.LittleEndian.Uint64(b[off:])
		}
		if call && x != 0 && (r == roleOut || r == roleReserved) && err == nil {
			err = fmt.Errorf("uapi: %T: %s field at offset %d is %#x in a call; must be zero: %w", arg, r, off, x, ErrInval)
		}
		f.SetUint(x)
	})
	return err
}
