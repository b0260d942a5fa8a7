package client_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
)

// inProcessOnly are the methods of softgpu.GPU a client does not have,
// each because it is device-wide, which across the boundary is the
// daemon's (softgpu-smi shows what there is to see), or because a client
// has one context. A method added to softgpu.GPU fails this test until it
// is given to the client or listed here with its reason.
var inProcessOnly = map[string]string{
	"DefaultContext": "a client is one context: GPU's own methods are in it",
	"NewContext":     "a client is one context; another context is another client",
	"ManagedStats":   "device-wide: the daemon's",
	"MemoryInUse":    "device-wide: softgpu-smi shows it",
	"SchedStats":     "device-wide: the daemon's",
	"SetIdle":        "privileged: the daemon's (softgpud's configuration)",
	"Stats":          "the driver's interrupt counters: the daemon's",
	"TLBStats":       "device-wide: the daemon's",
	"WriteTrace":     "the trace is the daemon's",
}

// TestTheClientHasTheInProcessAPI: every method of softgpu.GPU is a
// method of client.GPU with the same signature — the types of package
// client that stand for softgpu's (HostBuffer) compared by name — or is
// listed above with its reason.
func TestTheClientHasTheInProcessAPI(t *testing.T) {
	local, remote := reflect.TypeFor[*softgpu.GPU](), reflect.TypeFor[*client.GPU]()
	for i := range local.NumMethod() {
		m := local.Method(i)
		r, ok := remote.MethodByName(m.Name)
		if !ok {
			if _, listed := inProcessOnly[m.Name]; !listed {
				t.Errorf("client.GPU has no %s%s, and it is not listed as in-process only", m.Name, signature(m.Type))
			}
			continue
		}
		if _, listed := inProcessOnly[m.Name]; listed {
			t.Errorf("%s is listed as in-process only, but client.GPU has it", m.Name)
		}
		assert.Equal(t, signature(m.Type), signature(r.Type), "client.GPU.%s; softgpu.GPU.%s", m.Name, m.Name)
	}
	for name := range inProcessOnly {
		if _, ok := local.MethodByName(name); !ok {
			t.Errorf("%s is listed as in-process only, but softgpu.GPU has no such method", name)
		}
	}
}

// signature is a method's type without its receiver, with package names
// dropped, so that client.HostBuffer and softgpu.HostBuffer compare equal.
func signature(f reflect.Type) string {
	var in, out []string
	for i := 1; i < f.NumIn(); i++ {
		in = append(in, typeName(f.In(i)))
	}
	for i := range f.NumOut() {
		out = append(out, typeName(f.Out(i)))
	}
	return "(" + strings.Join(in, ", ") + ") (" + strings.Join(out, ", ") + ")"
}

func typeName(t reflect.Type) string {
	s := t.String()
	for _, pkg := range []string{"softgpu.", "client.", "driver.", "abi."} {
		s = strings.ReplaceAll(s, pkg, "")
	}
	return s
}
