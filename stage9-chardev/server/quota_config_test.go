package server_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
)

// TestAQuotaNoLimitCanHonourIsRefused: New refuses a quota that could
// only refuse everything, or take what it must leave, with an error that
// says which, and accepts the smallest that can be honoured.
func TestAQuotaNoLimitCanHonourIsRefused(t *testing.T) {
	root := int(abi.RootBytes >> abi.PageShift)
	tests := []struct {
		name    string
		client  server.Quota
		uid     server.Quota
		wantErr string // "" if New must succeed
	}{
		{"negative", server.Quota{Channels: -1}, server.Quota{}, "a negative limit"},
		{"every window entry", server.Quota{}, server.Quota{WindowEntries: abi.WindowSlots}, "must leave some for others"},
		{"page tables below a root, per client", server.Quota{PageTables: root - 1}, server.Quota{}, "every ATTACH would be refused"},
		{"page tables below a root, per uid", server.Quota{}, server.Quota{PageTables: 1}, "every ATTACH would be refused"},
		{"page tables of a root", server.Quota{PageTables: root}, server.Quota{PageTables: root}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := server.New(server.Config{Node: filepath.Join(t.TempDir(), "card0"), Device: deviceConfig(16 << 20),
				Log: quiet(), ClientQuota: tt.client, UidQuota: tt.uid})
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, s.Close())
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}
