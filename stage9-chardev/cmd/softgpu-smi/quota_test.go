package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/device"
	"softgpu/stage9-chardev/internal/leakcheck"
	"softgpu/stage9-chardev/server"
)

// TestShowsEachClientsUseAgainstItsQuotas: softgpu-smi shows a client's
// use of every pool against the daemon's per-client and per-uid limits,
// in text and in JSON alike.
func TestShowsEachClientsUseAgainstItsQuotas(t *testing.T) {
	leakcheck.Check(t)
	s := serve(t, server.Config{
		ClientQuota: server.Quota{DeviceMemory: 8 << 20, PinnedBytes: 4 << 20, WindowEntries: 5, Channels: 6, PageTables: 40},
		UidQuota:    server.Quota{DeviceMemory: 12 << 20, PinnedBytes: 6 << 20, WindowEntries: 7, Contexts: 3, Channels: 9, PageTables: 50},
	})
	ctl := control(t, s.Node())
	g := busyClient(t, s) // deviceBytes of device memory, hostBytes registered, two channels
	cur := mustTake(t, ctl, s.Node())
	// The tables its mappings took depend on where the driver put them:
	// read them from the sample, and check only that there are some
	// beyond its root.
	var tables uint64
	for _, q := range cur.quotas {
		if q.Context == uint32(g.Context()) {
			tables = uint64(q.Use.PageTables)
		}
	}
	if root := uint64(abi.RootBytes >> abi.PageShift); tables <= root {
		t.Errorf("CLIENT_QUOTA: the client's tables take %d pages; want more than its root's %d", tables, root)
	}

	// Its device memory: its allocations, and its two channels'
	// context-save areas.
	charged := uint64(deviceBytes + 2*device.DefaultContextSize)
	var text bytes.Buffer
	require.NoError(t, writeText(&text, cur, cur))
	wantPid := fmt.Sprintf("pid %d  %s/8.0 MiB  %s/4.0 MiB  1/5  1/1  2/6  %d/40", os.Getpid(), byteSize(charged), byteSize(hostBytes), tables)
	wantUid := fmt.Sprintf(" uid %d  %s/12.0 MiB  %s/6.0 MiB  1/7  1/3  2/9  %d/50", os.Getuid(), byteSize(charged), byteSize(hostBytes), tables)
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	// The header names every column the rows fill: a pool added to the
	// rows and not to the header would print under no name.
	header := "QUOTA DEVICE MEM PINNED WINDOW CONTEXTS CHANNELS TABLE PAGES"
	if !slices.ContainsFunc(strings.Split(text.String(), "\n"), func(line string) bool { return squeeze(line) == header }) {
		t.Errorf("the quotas table lacks its header %q in:\n%s", header, text.String())
	}
	if out := squeeze(text.String()); !strings.Contains(out, squeeze(wantPid)) || !strings.Contains(out, squeeze(wantUid)) {
		t.Errorf("the quotas table lacks the client's rows\n%s\n%s\nin:\n%s", wantPid, wantUid, text.String())
	}

	var out bytes.Buffer
	require.NoError(t, writeJSON(&out, cur, cur))
	var r struct {
		Clients []struct {
			Context uint32      `json:"context"`
			Quota   quotaReport `json:"quota"`
		} `json:"clients"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), "-json output does not parse\n%s", out.String())
	if len(r.Clients) != 1 || r.Clients[0].Context != uint32(g.Context()) {
		t.Fatalf("JSON clients = %+v; want context %d", r.Clients, g.Context())
	}
	want := quotaReport{
		DeviceMemory: poolReport{charged, 8 << 20, charged, 12 << 20},
		PinnedBytes:  poolReport{hostBytes, 4 << 20, hostBytes, 6 << 20},
		Window:       poolReport{1, 5, 1, 7},
		Contexts:     poolReport{1, 1, 1, 3},
		Channels:     poolReport{2, 6, 2, 9},
		PageTables:   poolReport{tables, 40, tables, 50},
	}
	assert.Equal(t, want, r.Clients[0].Quota, "JSON quota")
}
