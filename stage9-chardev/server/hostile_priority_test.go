package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// Priority is granted, not taken (issue 32, item 7): a stranger opens
// channels at normal priority or lower; a higher priority, or a timeslice
// of its own choosing, needs the daemon's permission — softgpud's
// -priority-uids, or root — as DRM asks CAP_SYS_NICE for a high-priority
// context. Without it the call is refused with ErrPerm, and nothing about
// the device changes.

func init() {
	strangerRoles["priority"] = priorityStranger
}

// priorityStranger opens a channel with every priority and a timeslice,
// and reports each CHANNEL_OPEN's outcome.
func priorityStranger(node, _ string) error {
	g, err := client.Dial(node)
	if err != nil {
		return err
	}
	defer g.Close()
	for _, o := range priorityAsks {
		ch, err := g.NewChannel(client.Compute, o.opts)
		fmt.Println(errnoLine(o.name, err))
		if err == nil {
			ch.Close()
		}
	}
	fmt.Println("done")
	return nil
}

// priorityAsks are the channels the stranger asks for, and whether each
// needs the daemon's permission.
var priorityAsks = []struct {
	name    string
	opts    client.ChannelOptions
	granted bool // needs permission
}{
	{"low", client.ChannelOptions{Priority: softgpu.PriorityLow}, false},
	{"normal", client.ChannelOptions{Priority: softgpu.PriorityNormal}, false},
	{"high", client.ChannelOptions{Priority: softgpu.PriorityHigh}, true},
	{"max", client.ChannelOptions{Priority: softgpu.PriorityRealtime}, true},
	{"timeslice", client.ChannelOptions{Priority: softgpu.PriorityNormal, Timeslice: time.Millisecond}, true},
}

func TestAStrangerCannotTakePriority(t *testing.T) {
	cred, uid := strangerCred()
	for _, tt := range []struct {
		name    string
		args    []string
		granted bool
	}{
		{"not granted", nil, false},
		{"granted by -priority-uids", []string{"-priority-uids", "1," + strconv.Itoa(int(uid))}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t, tt.args...)
			w := dialWellBehaved(t, d.node)
			w.roundTrip(t, "before", 1)
			got := startStranger(t, "priority", d.node, "", cred).findings(t)
			var want []string
			for _, o := range priorityAsks {
				if o.granted && !tt.granted {
					want = append(want, fmt.Sprintf("%s errno=%d", o.name, uint32(uapi.ErrPerm)))
				} else {
					want = append(want, o.name+" ok")
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("the stranger's CHANNEL_OPENs (uid %d):\n got %q\nwant %q", uid, got, want)
			}
			w.roundTrip(t, "after", 2)
			d.stop(t)
		})
	}
}
