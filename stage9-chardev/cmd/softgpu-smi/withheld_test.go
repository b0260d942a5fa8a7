package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/uapi"
)

// TestWithheldCountersShowAsWithheld: a daemon of uapi 2.3 withholds the
// device's activity and another user's client's counters from a user who
// is neither root nor the daemon's (server/info.go), and they read 0.
// softgpu-smi must show them as withheld, not as a device at rest and a
// client holding nothing: in text, a dash in each column; in JSON, the
// withheld flags.
func TestWithheldCountersShowAsWithheld(t *testing.T) {
	at := time.Unix(1000, 0)
	cur := sample{at: at, node: "/run/softgpu/card0", version: uapi.Version{Major: 2, Minor: 3},
		info:    uapi.Info{MemoryTotal: 16 << 20, Withheld: 1},
		clients: []uapi.ClientInfo{{Pid: 4242, Uid: 1000, Context: 1, Withheld: 1}},
		quotas:  []uapi.ClientQuota{{Pid: 4242, Uid: 1000, Context: 1, Limit: uapi.Pools{DeviceMemory: 8 << 20}}}}
	prev := cur
	prev.at = at.Add(-time.Second)

	var text bytes.Buffer
	require.NoError(t, writeText(&text, prev, cur))
	out := text.String()
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	assert.Contains(t, out, "shown only to root and the daemon's user", "the device line of a withheld sample")
	assert.NotContains(t, out, "used", "a withheld sample shows no memory in use")
	assert.Contains(t, squeeze(out), "4242 1000 1 - - - -", "the withheld client's row")
	assert.NotContains(t, out, "QUOTA", "a withheld client's quota row (its use reads 0)")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "compute") || strings.HasPrefix(line, "copy") {
			assert.True(t, strings.HasSuffix(squeeze(line), "- - - -"), "engine row %q of a withheld sample", line)
		}
	}

	var js bytes.Buffer
	require.NoError(t, writeJSON(&js, prev, cur))
	var r struct {
		Withheld bool `json:"withheld"`
		Clients  []struct {
			Withheld bool `json:"withheld"`
		} `json:"clients"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &r))
	assert.True(t, r.Withheld, "JSON: the sample's withheld flag")
	require.Len(t, r.Clients, 1)
	assert.True(t, r.Clients[0].Withheld, "JSON: the client's withheld flag")
}
