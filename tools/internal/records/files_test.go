package records

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	txt, js := filepath.Join(dir, "r.txt"), filepath.Join(dir, "r.json")
	require.NoError(t, WriteFiles(File{txt, []byte("text 1")}, File{js, []byte("json 1")}), "WriteFiles")
	for path, want := range map[string]string{txt: "text 1", js: "json 1"} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, FileMode, fi.Mode().Perm(), "%s has mode %v", path, fi.Mode().Perm())
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s = %q; want %q", path, got, want)
		}
	}
	assertNoTemps(t, dir, 2)
}

// TestWriteFilesFailure makes the second rename fail (its target is a
// directory holding a file) and checks the first target keeps what it had,
// or does not appear if it was new.
func TestWriteFilesFailure(t *testing.T) {
	tests := []struct {
		name   string
		oldTxt string // "" for none
	}{
		{"new pair", ""},
		{"replacing a pair", "text 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			txt, js := filepath.Join(dir, "r.txt"), filepath.Join(dir, "r.json")
			if tt.oldTxt != "" {
				require.NoError(t, os.WriteFile(txt, []byte(tt.oldTxt), 0o644))
			}
			require.NoError(t, os.MkdirAll(filepath.Join(js, "blocker"), 0o755))
			err := WriteFiles(File{txt, []byte("text 1")}, File{js, []byte("json 1")})
			require.Error(t, err, "WriteFiles over a directory")
			got, readErr := os.ReadFile(txt)
			switch {
			case tt.oldTxt == "" && !os.IsNotExist(readErr):
				t.Errorf("after a failed WriteFiles, r.txt exists (%q, %v); want no new file", got, readErr)
			case tt.oldTxt != "" && string(got) != tt.oldTxt:
				t.Errorf("after a failed WriteFiles, r.txt = %q, %v; want its old %q", got, readErr, tt.oldTxt)
			}
			want := 1 // the directory r.json
			if tt.oldTxt != "" {
				want = 2
			}
			assertNoTemps(t, dir, want)
		})
	}
}

// assertNoTemps checks dir holds n entries and no temporary file.
func assertNoTemps(t *testing.T, dir string, n int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(entries) != n || strings.Contains(strings.Join(names, " "), ".tmp") {
		t.Errorf("%s holds %q; want %d files and no temporary file", dir, names, n)
	}
}

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name    string
		probe   func(string) error
		path    string
		wantErr string // "" for none
	}{
		{"dir exists", ProbeDir, dir, ""},
		{"dir to be made", ProbeDir, filepath.Join(dir, "a", "b"), ""},
		{"dir is a file", ProbeDir, file, "is not a directory"},
		{"dir under a file", ProbeDir, filepath.Join(file, "sub"), "file is not a directory"},
		{"file in a dir", ProbeFile, filepath.Join(dir, "out.txt"), ""},
		{"file replaced", ProbeFile, file, ""},
		{"file is a dir", ProbeFile, dir, "is a directory"},
		{"file in a missing dir", ProbeFile, filepath.Join(dir, "nope", "out.txt"), "no such file or directory"},
		{"file under a file", ProbeFile, filepath.Join(file, "out.txt"), "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.probe(tt.path)
			if (tt.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("probe(%s) = %v; want error %q", tt.path, err, tt.wantErr)
			}
		})
	}
	assertNoTemps(t, dir, 1)
}
