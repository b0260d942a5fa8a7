package driver

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDriverReachesTheDeviceOnlyThroughHardware: no file of the driver
// (tests aside) imports the device package. Everything the driver uses of
// a device comes through the Hardware interface, so that another
// implementation of it — memory shared with another process — can stand
// in for the device without a line of the driver changing.
func TestDriverReachesTheDeviceOnlyThroughHardware(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasSuffix(path, "/device") {
				t.Errorf("%s imports %s: the driver must reach the device only through Hardware", name, path)
			}
		}
	}
}
