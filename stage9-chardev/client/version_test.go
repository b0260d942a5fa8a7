package client

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/uapi"
)

// TestVersionRefusalSaysWhy: a daemon of another major version refuses
// VERSION with ErrVersion alone (an error reply carries no payload), so
// the client's error is all a user learns: it names the node and this
// client's version, and says what the major moved for.
func TestVersionRefusalSaysWhy(t *testing.T) {
	err := versionError("/run/softgpu/card0", uapi.ErrVersion)
	require.ErrorIs(t, err, uapi.ErrVersion)
	for _, want := range []string{"/run/softgpu/card0", fmt.Sprintf("this client's %d.%d", uapi.VersionMajor, uapi.VersionMinor),
		"since 3.0 a channel is served only after CHANNEL_START"} {
		assert.Contains(t, err.Error(), want)
	}
}
