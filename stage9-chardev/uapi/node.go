package uapi

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultNode is where the daemon serves its node, and where clients look
// for it, unless told otherwise: $XDG_RUNTIME_DIR/softgpu/card0 — the
// per-user runtime directory systemd makes, mode 0700 — or, without one,
// softgpu-UID/card0 under the temporary directory.
func DefaultNode() string {
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "softgpu", "card0")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("softgpu-%d", os.Getuid()), "card0")
}
