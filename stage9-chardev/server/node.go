package server

// The node's path: who could have made it. The daemon's clients trust the
// node to be the daemon; whoever controls a directory on the path to it
// can put a socket of their own there first, or swap the daemon's for
// one, and read every call a client makes. So, before it listens:
//
//   - every component of the path that exists already must belong to the
//     daemon's uid or root (a symlink included: its owner is who chose
//     where it points);
//   - a component others may write must be sticky (as /tmp is: they can
//     add entries, not rename or remove ours), and the node's own
//     directory must be writable by its owner alone;
//   - what the daemon creates, it creates 0700;
//   - anything already at the node that is not a socket of the daemon's
//     uid is refused, not removed.
//
// The default node, $XDG_RUNTIME_DIR/softgpu/card0, is in a directory
// only the user has (pam_systemd makes it 0700); the fallback,
// /tmp/softgpu-UID/card0, is one any user can pre-create in /tmp, and is
// then refused (uapi.DefaultNode).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnsafeNode reports a node path another uid owns or could have made.
var ErrUnsafeNode = errors.New("softgpu: the node's path is not safe")

// ANCHOR: safenode

// makeNodeDir checks every existing component of node's directory,
// creates the missing ones 0700, and checks what is at node itself.
func makeNodeDir(node string) error {
	node, err := filepath.Abs(node)
	if err != nil {
		return fmt.Errorf("softgpu: node %s: %w", node, err)
	}
	dir := filepath.Dir(node)
	uid := uint32(os.Getuid())
	path := "/"
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	for i, part := range append([]string{""}, parts...) {
		if part != "" {
			path = filepath.Join(path, part)
		}
		last := i == len(parts)
		var st unix.Stat_t
		err := unix.Lstat(path, &st)
		if errors.Is(err, unix.ENOENT) {
			if err := os.Mkdir(path, 0o700); err != nil { // ours, as the umask may not leave it
				return fmt.Errorf("softgpu: node directory: %w", err)
			}
			if err := os.Chmod(path, 0o700); err != nil {
				return fmt.Errorf("softgpu: node directory: %w", err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("softgpu: node directory %s: %w", path, err)
		}
		if st.Uid != uid && st.Uid != 0 {
			return fmt.Errorf("%w: %s belongs to uid %d, not to this daemon's %d or root", ErrUnsafeNode, path, st.Uid, uid)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, err := filepath.EvalSymlinks(path)
			if err != nil {
				return fmt.Errorf("softgpu: node directory %s: %w", path, err)
			}
			// The link is the daemon's or root's; where it leads is checked
			// the same way, the rest of the path after it.
			return makeNodeDir(filepath.Join(append([]string{target}, append(parts[i:], filepath.Base(node))...)...))
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("softgpu: node directory %s is not a directory: %w", path, syscall.ENOTDIR)
		}
		othersWrite := st.Mode&0o022 != 0
		switch {
		case othersWrite && last:
			return fmt.Errorf("%w: %s, the node's directory, may be written by others (mode %#o): they could put a node of their own there", ErrUnsafeNode, path, st.Mode&0o7777)
		case othersWrite && st.Mode&unix.S_ISVTX == 0:
			return fmt.Errorf("%w: %s may be written by others and is not sticky (mode %#o): they could rename the node's directory away", ErrUnsafeNode, path, st.Mode&0o7777)
		}
	}
	return checkNodeFile(node, uid)
}

// ANCHOR_END: safenode

// checkNodeFile refuses what is at node unless it is nothing or a socket
// of uid (a daemon's, stale or live: listen tells them apart).
func checkNodeFile(node string, uid uint32) error {
	var st unix.Stat_t
	err := unix.Lstat(node, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("softgpu: node %s: %w", node, err)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return fmt.Errorf("%w: %s is there already and is not a socket (%v); not removing it", ErrUnsafeNode, node, fs.FileMode(st.Mode&0o777))
	case st.Uid != uid:
		return fmt.Errorf("%w: the socket at %s belongs to uid %d", ErrUnsafeNode, node, st.Uid)
	}
	return nil
}
