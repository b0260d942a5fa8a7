package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"softgpu/tools/internal/records"
)

// ClearDir empties dir, making it if it does not exist, so that a command
// can write its output there afresh. A dir that holds files but not
// marker, the file the command leaves in every directory it writes, is
// someone else's: ClearDir leaves it as it is and returns false, so that a
// mistyped flag cannot delete anyone's work. The caller says why it
// refuses, in its own words, and writes marker again before anything else.
//
// The marker is removed last, and the caller writes it first: a command
// stopped part-way, clearing or writing, leaves a directory still marked
// as its own, which its next run may replace.
func ClearDir(dir, marker string) (cleared bool, err error) {
	switch ok, err := Clearable(dir, marker); {
	case err != nil:
		return false, err
	case !ok:
		return false, nil
	}
	entries, err := os.ReadDir(dir)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return false, err
	case len(entries) > 0:
		for _, e := range entries {
			if e.Name() == marker {
				continue
			}
			if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
				return false, err
			}
		}
		if err := removeAll(filepath.Join(dir, marker)); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	return true, nil
}

// Clearable reports whether ClearDir would clear dir: it does not exist, is
// empty, or holds marker. A command asks before its work, so that a
// directory it would refuse is refused at once, as misuse.
func Clearable(dir, marker string) (bool, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case os.IsNotExist(err):
		return true, nil
	case err != nil:
		return false, err
	case len(entries) == 0:
		return true, nil
	}
	_, err = os.Stat(filepath.Join(dir, marker))
	return err == nil, nil
}

// removeAll is os.RemoveAll; a test replaces it to see the order.
var removeAll = os.RemoveAll

// ProbeOut checks, before a command's work, that the command could write
// into dir once the work is done: dir accepts files, or can be made
// (records.ProbeDir), and ClearDir would clear it. tool names the command
// in the refusal.
func ProbeOut(dir, marker, tool string) error {
	if err := records.ProbeDir(dir); err != nil {
		return err
	}
	switch ok, err := Clearable(dir, marker); {
	case err != nil:
		return err
	case !ok:
		return NotOurs(dir, marker, tool)
	}
	return nil
}

// NotOurs is the refusal of a directory that ClearDir would not clear.
func NotOurs(dir, marker, tool string) error {
	return fmt.Errorf("%s is not empty and was not written by %s (no %s); refusing to replace it", dir, tool, marker)
}
