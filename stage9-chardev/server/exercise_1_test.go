//go:build exercise

package server_test

// The checker of exercise 9.1, "An ioctl of your own" (book/stage9-chardev.md):
//
//	go test -tags exercise -run Exercise9_1 ./server
//
// It fails on the untouched stage and passes once CHANNEL_PRIORITY is
// added with every step the exercise lists. It compiles before that: it
// finds the call by name in uapi.Calls, sets its argument's fields by
// name (Channel, Priority), and reaches the new method through an
// interface, so each missing step is a failure that names it. It checks
// what the call does at the boundary — who may ask, with what — and that
// the channel goes on working; it does not time the scheduler (a channel
// that has waited a millisecond runs whatever its priority, so order
// alone cannot show a priority, and this test asserts no time).

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/server"
	"softgpu/stage9-chardev/uapi"
)

func init() {
	strangerRoles["exercise-9.1"] = raiseOwnPriority
}

// prioritySetter is the method the exercise adds to softgpu.Channel (and
// so to a client's channel, the same type).
type prioritySetter interface {
	SetPriority(softgpu.Priority) error
}

// channelPriority returns CHANNEL_PRIORITY's row of uapi.Calls.
func channelPriority(t *testing.T) *uapi.Call {
	t.Helper()
	for i := range uapi.Calls {
		if uapi.Calls[i].Name == "CHANNEL_PRIORITY" {
			return &uapi.Calls[i]
		}
	}
	t.Fatal("uapi.Calls has no CHANNEL_PRIORITY row: add the argument struct (uapi/args.go), its request number and Request method, and its row at the end of Calls (uapi/calls.go)")
	return nil
}

// priorityArg returns a new CHANNEL_PRIORITY argument naming channel id
// and priority p, its fields set by name.
func priorityArg(t *testing.T, c *uapi.Call, id abi.Channel, p uint32) uapi.Arg {
	t.Helper()
	arg := c.New()
	v := reflect.ValueOf(arg).Elem()
	for name, x := range map[string]uint64{"Channel": uint64(id), "Priority": uint64(p)} {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Uint32 {
			t.Fatalf("%T has no uint32 field %s: the exercise's struct has Channel and Priority, both uint32", arg, name)
		}
		f.SetUint(x)
	}
	return arg
}

func TestExercise9_1(t *testing.T) {
	call := channelPriority(t)

	t.Run("abi", func(t *testing.T) {
		last := &uapi.Calls[len(uapi.Calls)-1]
		if last != call {
			t.Errorf("CHANNEL_PRIORITY is not the last row of uapi.Calls (%s is): a new call goes at the end, a number never moves", last.Name)
		}
		prev := uapi.Calls[len(uapi.Calls)-2].Request
		if got, want := uapi.Nr(call.Request), uapi.Nr(prev)+1; got != want {
			t.Errorf("CHANNEL_PRIORITY's nr = %#02x; want %#02x, the next free one", got, want)
		}
		if got := uapi.Dir(call.Request); got != uapi.IocWrite {
			t.Errorf("CHANNEL_PRIORITY's direction = %d; want IocWrite (%d): the client passes the channel and priority, the daemon returns nothing", got, uapi.IocWrite)
		}
		if got, want := uapi.Size(call.Request), uint32(reflect.TypeOf(call.New()).Elem().Size()); got != want {
			t.Errorf("CHANNEL_PRIORITY's request number encodes size %d; its argument is %d bytes", got, want)
		}
		// A new call is a minor version: the newest "(since M.N)" of the
		// current major M in doc.go's table must be CHANNEL_PRIORITY's,
		// and N the current minor.
		if doc, err := os.ReadFile("../uapi/doc.go"); err == nil {
			newest, newestRow := -1, ""
			since := regexp.MustCompile(fmt.Sprintf(`(?m)^//\s+0x[0-9a-f]+\s+(\S+).*\(since %d\.(\d+)\)`, uapi.VersionMajor))
			for _, m := range since.FindAllStringSubmatch(string(doc), -1) {
				if n, _ := strconv.Atoi(m[2]); n >= newest {
					newest, newestRow = n, m[1]
				}
			}
			if newestRow != "CHANNEL_PRIORITY" || newest != uapi.VersionMinor {
				t.Errorf("uapi.VersionMinor = %d and the newest call in doc.go is %s (since %d.%d); a new call is a minor version: bump it, say what it added beside it, and mark its row (since %d.%d)",
					uapi.VersionMinor, newestRow, uapi.VersionMajor, newest, uapi.VersionMajor, uapi.VersionMinor)
			}
		}
		for _, f := range []struct{ path, want, step string }{
			{"../uapi/doc.go", "CHANNEL_PRIORITY", "its row in the table of calls"},
			{"../include/softgpu_uapi.h", "SOFTGPU_IOCTL_CHANNEL_PRIORITY", "the C header regenerated: go test ./uapi -run CHeader -update"},
			{"../uapi/ioc_test.go", `"CHANNEL_PRIORITY"`, "its request number pinned in TestRequestNumbers"},
			{"../uapi/layout_unsafe_test.go", `"ChannelPriority"`, "its size pinned in TestSizeofPinned"},
		} {
			data, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), f.want) {
				t.Errorf("%s does not mention %s: %s", f.path, f.want, f.step)
			}
		}
	})

	t.Run("daemon", func(t *testing.T) {
		s := serve(t, server.Config{})
		r := dialRaw(t, s.Node())
		r.attach()
		ch := r.openChannel(abi.EngineCompute)
		for _, tt := range []struct {
			name string
			id   abi.Channel
			prio uint32
			want uapi.Errno
		}{
			{"raise its own channel (root is granted)", ch.id, abi.PriorityHigh, uapi.OK},
			{"lower it", ch.id, abi.PriorityLow, uapi.OK},
			{"above the maximum", ch.id, abi.MaxPriority + 1, uapi.ErrInval},
			{"a channel it did not open", abi.NumChannels - 1, abi.PriorityLow, uapi.ErrNoEntry},
		} {
			if got, _ := r.call(priorityArg(t, call, tt.id, tt.prio)); got != tt.want {
				t.Errorf("%s: CHANNEL_PRIORITY(channel %d, priority %d) = %v; want %v", tt.name, tt.id, tt.prio, got, tt.want)
			}
		}
		i := ch.put(abi.Command{Op: abi.OpNop, Ctx: r.ctx})
		ch.ring(ch.next)
		if got := ch.wait(i); got != abi.StatusOK {
			t.Errorf("a NOP after the priority changes completed with %v; want %v", got, abi.StatusOK)
		}
	})

	t.Run("both paths", func(t *testing.T) {
		g, err := softgpu.Open(softgpu.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		s := serve(t, server.Config{})
		c := dial(t, s)
		for _, p := range []struct {
			name string
			open func() (*softgpu.Channel, error)
		}{
			{"in-process", func() (*softgpu.Channel, error) {
				return g.NewChannel(softgpu.Copy, softgpu.ChannelOptions{Priority: softgpu.PriorityNormal})
			}},
			{"client", func() (*softgpu.Channel, error) {
				return c.NewChannel(client.Copy, client.ChannelOptions{Priority: softgpu.PriorityNormal})
			}},
		} {
			ch, err := p.open()
			if err != nil {
				t.Fatalf("%s: NewChannel: %v", p.name, err)
			}
			set, ok := any(ch).(prioritySetter)
			if !ok {
				t.Fatalf("%s: softgpu.Channel has no method SetPriority(Priority) error", p.name)
			}
			if err := set.SetPriority(softgpu.PriorityHigh); err != nil {
				t.Errorf("%s: SetPriority(PriorityHigh) = %v; want nil", p.name, err)
			}
			if err := set.SetPriority(softgpu.PriorityRealtime + 1); err == nil {
				t.Errorf("%s: SetPriority(%d), above the maximum, = nil; want an error", p.name, softgpu.PriorityRealtime+1)
			}
			if err := ch.Nop(); err != nil {
				t.Errorf("%s: a NOP after SetPriority: %v", p.name, err)
			}
			if err := ch.Close(); err != nil {
				t.Errorf("%s: Close: %v", p.name, err)
			}
			if err := set.SetPriority(softgpu.PriorityLow); err == nil {
				t.Errorf("%s: SetPriority on a closed channel = nil; want an error", p.name)
			}
		}
	})

	t.Run("a stranger is not granted a raise", func(t *testing.T) {
		cred, uid := strangerCred()
		d := startDaemon(t)
		got := startStranger(t, "exercise-9.1", d.node, "", cred).findings(t)
		want := []string{"low ok", fmt.Sprintf("high errno=%d", uint32(uapi.ErrPerm))}
		if !slices.Equal(got, want) {
			t.Errorf("the stranger's SetPriority calls (uid %d, no -priority-uids):\n got %q\nwant %q", uid, got, want)
		}
		d.live(t, "after the stranger's calls")
		d.stop(t)
	})
}

// raiseOwnPriority opens a channel at normal priority, lowers it and then
// tries to raise it, and reports each SetPriority's outcome.
func raiseOwnPriority(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	ch, err := g.NewChannel(client.Compute, client.ChannelOptions{Priority: softgpu.PriorityNormal})
	if err != nil {
		return err
	}
	defer ch.Close()
	set, ok := any(ch).(prioritySetter)
	if !ok {
		fmt.Println("softgpu.Channel has no SetPriority")
	} else {
		fmt.Println(errnoLine("low", set.SetPriority(softgpu.PriorityLow)))
		fmt.Println(errnoLine("high", set.SetPriority(softgpu.PriorityHigh)))
	}
	fmt.Println("done")
	return nil
}
