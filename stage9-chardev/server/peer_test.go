package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestTheNodesModeDecidesWhoMayConnect: mayConnect applies the node's
// owner, group and mode to a client's credentials as the kernel applies a
// device node's to open(2) — the owner's bits for its owner, the group's
// for its group, the others' for everyone else, read and write both
// needed — and root may always connect.
func TestTheNodesModeDecidesWhoMayConnect(t *testing.T) {
	node := filepath.Join(t.TempDir(), "card0")
	require.NoError(t, os.WriteFile(node, nil, 0o600))
	var st unix.Stat_t
	require.NoError(t, unix.Stat(node, &st))
	owner, group := st.Uid, st.Gid
	stranger := owner + 4242
	tests := []struct {
		mode     os.FileMode
		uid, gid uint32
		want     bool
	}{
		{0o600, owner, group, true},
		{0o600, stranger, group, false},
		{0o660, stranger, group, true},
		{0o640, stranger, group, false}, // read alone is not enough
		{0o600, stranger, group + 1, false},
		{0o606, stranger, group + 1, true},
		{0o000, 0, 0, true}, // root
	}
	for _, tt := range tests {
		s := &Server{cfg: Config{Mode: tt.mode}, node: node}
		assert.Equal(t, tt.want, s.mayConnect(&unix.Ucred{Pid: 1, Uid: tt.uid, Gid: tt.gid}), "mode %#o, uid %d gid %d (owner %d group %d): mayConnect", tt.mode, tt.uid, tt.gid, owner, group)
	}
}
