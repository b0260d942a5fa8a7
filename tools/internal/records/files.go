package records

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// FileMode is the mode of every file the tools write: readable by all, as
// a file in a repository is.
const FileMode fs.FileMode = 0o644

// WriteFileAtomic writes data to path through a temporary file beside it and
// a rename, so that a reader (or an interrupted run) never sees half a file.
// The file gets FileMode whatever the umask.
func WriteFileAtomic(path string, data []byte) error {
	return WriteFiles(File{Path: path, Data: data})
}

// File is one file of a set written together.
type File struct {
	Path string
	Data []byte
}

// WriteFiles writes files as a set: either every one of them is replaced or
// none is. Each is first written in full to a temporary file beside its
// target; only then are they renamed into place, in order. If a rename
// fails, the targets already replaced get their old contents back (or are
// removed, if they did not exist before), so a failure leaves no new file
// behind, and every temporary file is removed.
func WriteFiles(files ...File) (err error) {
	temps := make([]string, len(files))
	defer func() {
		for _, t := range temps {
			if t != "" {
				os.Remove(t) // no-op after a successful rename
			}
		}
	}()
	for i, f := range files {
		if temps[i], err = writeTemp(f.Path, f.Data); err != nil {
			return err
		}
	}
	type previous struct {
		data   []byte
		mode   fs.FileMode
		exists bool
	}
	var done []previous // what the targets renamed so far held before
	for i, f := range files {
		var prev previous
		if fi, err := os.Stat(f.Path); err == nil && fi.Mode().IsRegular() {
			data, err := os.ReadFile(f.Path)
			if err != nil {
				return err
			}
			prev = previous{data: data, mode: fi.Mode().Perm(), exists: true}
		}
		if err := os.Rename(temps[i], f.Path); err != nil {
			for j := len(done) - 1; j >= 0; j-- {
				if done[j].exists {
					restore(files[j].Path, done[j].data, done[j].mode)
				} else {
					os.Remove(files[j].Path)
				}
			}
			return err
		}
		temps[i] = ""
		done = append(done, prev)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path and returns its
// name.
func writeTemp(path string, data []byte) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), FileMode)); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// restore puts old contents back after a failed set of renames, as well as
// it can: the original failure is the error reported.
func restore(path string, data []byte, mode fs.FileMode) {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return
	}
	os.Chmod(tmp, mode)
	if os.Rename(tmp, path) != nil {
		os.Remove(tmp)
	}
}

// ProbeDir checks, before any work is done, that files can later be written
// into dir: dir is a directory that accepts a new file, or does not exist
// yet and its nearest existing ancestor is such a directory (so MkdirAll
// will make it). It leaves nothing behind.
func ProbeDir(dir string) error {
	probe := dir
	for {
		fi, err := os.Stat(probe)
		if err == nil {
			if !fi.IsDir() {
				if probe == dir {
					return fmt.Errorf("%s is not a directory", dir)
				}
				return fmt.Errorf("cannot create %s: %s is not a directory", dir, probe)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return err
		}
		probe = parent
	}
	f, err := os.CreateTemp(probe, ".probe*")
	if err != nil {
		if probe == dir {
			return fmt.Errorf("cannot write into %s: %w", dir, cause(err))
		}
		return fmt.Errorf("cannot create %s: cannot write into %s: %w", dir, probe, cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// ProbeFile checks, before any work is done, that path can later be written
// with WriteFileAtomic: it is not a directory, and its directory exists and
// accepts a new file. It leaves nothing behind.
func ProbeFile(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cannot write %s: %s: %w", path, dir, cause(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("cannot write %s: %s is not a directory", path, dir)
	}
	return ProbeDir(dir)
}

// cause drops the operation and path from a *fs.PathError, whose message
// would repeat a path the caller's message already names.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
