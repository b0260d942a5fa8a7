//go:build exercise

package softgpu_test

// The checker of exercise 5.1, "A read-only mapping" (book/stage5-vm.md):
//
//	go test -tags exercise -run Exercise5_1 .
//
// The exercise gives Context.AllocPages and Context.Map a last, variadic
// parameter of flags,
//
//	type MapFlags uint32
//	const MapReadOnly MapFlags = 1 << 0
//	func (c *Context) AllocPages(size uint64, page PageSize, flags ...MapFlags) (Ptr, error)
//	func (c *Context) Map(h *HostBuffer, page PageSize, flags ...MapFlags) (Ptr, error)
//
// so that every existing call still compiles. This file calls both
// through reflection, passing MapReadOnly by its value, so that it
// compiles before they take flags.

import (
	"errors"
	"reflect"
	"testing"

	softgpu "softgpu/stage5-vm"
	"softgpu/stage5-vm/abi"
)

// callReadOnly calls method name of ctx with args and MapReadOnly, and
// returns the Ptr and error it returns.
func callReadOnly(t *testing.T, ctx *softgpu.Context, name string, args ...any) (softgpu.Ptr, error) {
	t.Helper()
	m := reflect.ValueOf(ctx).MethodByName(name)
	if !m.Type().IsVariadic() {
		t.Fatalf("Context.%s takes no flags: give it a last parameter `flags ...MapFlags`, with `MapReadOnly MapFlags = 1 << 0`", name)
	}
	flag := reflect.New(m.Type().In(m.Type().NumIn() - 1).Elem()).Elem()
	flag.SetUint(1) // MapReadOnly
	in := make([]reflect.Value, 0, len(args)+1)
	for _, a := range args {
		in = append(in, reflect.ValueOf(a))
	}
	out := m.Call(append(in, flag))
	err, _ := out[1].Interface().(error)
	return out[0].Interface().(softgpu.Ptr), err
}

func TestExercise5_1(t *testing.T) {
	g := openTest(t)
	ctx, err := g.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	src, err := ctx.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Fill(src, 4096, 5); err != nil {
		t.Fatal(err)
	}
	h, err := g.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer g.HostFree(h)

	for _, tt := range []struct {
		name string
		args []any
	}{
		{"AllocPages", []any{uint64(4096), softgpu.Page4K}},
		{"Map", []any{h, softgpu.Page4K}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ro, err := callReadOnly(t, ctx, tt.name, tt.args...)
			if err != nil {
				t.Fatalf("%s(..., MapReadOnly): %v", tt.name, err)
			}
			err = ctx.Copy(ro+8, src, 64)
			if !errors.Is(err, abi.StatusReadOnly) {
				t.Errorf("COPY into a read-only mapping = %v; want %v", err, abi.StatusReadOnly)
			}
			var fe *softgpu.FaultError
			if !errors.As(ctx.Err(), &fe) || fe.VA != uint64(ro+8) {
				t.Errorf("the context's fault = %v; want one at VA %#x, the COPY's first byte", ctx.Err(), uint64(ro+8))
			}
			ctx.ClearFault()
			if err := ctx.Copy(src, ro, 64); err != nil {
				t.Errorf("COPY from the read-only mapping = %v; want nil: it is readable", err)
			}
			if tt.name == "AllocPages" {
				if err := ctx.Free(ro); err != nil {
					t.Errorf("Free: %v", err)
				}
			} else if err := ctx.Unmap(ro); err != nil {
				t.Errorf("Unmap: %v", err)
			}
		})
	}
	// Without the flag, a mapping stays writable.
	w, err := ctx.AllocPages(4096, softgpu.Page4K)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Copy(w, src, 64); err != nil {
		t.Errorf("COPY into a mapping made without flags = %v; want nil", err)
	}
}
