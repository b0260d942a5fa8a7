package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// I/O and page-cache load of another uid. A process that
// never opens the node writes files through the page cache and syncs
// them, again and again: dirty pages, writeback, the block layer, and
// the memory bus the daemon's copies into a client's memory share.

func init() {
	strangerRoles["iohog"] = ioHog
}

// ioHog (arg: "writers MiB seconds dir") has each of writers goroutines
// write a file of MiB in dir in 1 MiB writes, fsync it, and start over,
// for seconds; says "ready" at the start and removes its files at the
// end.
func ioHog(_, arg string) error {
	var writers, mib, seconds int
	var dir string
	fmt.Sscan(arg, &writers, &mib, &seconds, &dir)
	end := time.Now().Add(time.Duration(seconds) * time.Second)
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	done := make(chan struct{}, writers)
	for w := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			name := filepath.Join(dir, fmt.Sprintf("iohog-%d", w))
			defer os.Remove(name)
			for time.Now().Before(end) {
				f, err := os.Create(name)
				if err != nil {
					fmt.Printf("error: %v\n", err)
					return
				}
				for range mib {
					if _, err := f.Write(chunk); err != nil || !time.Now().Before(end) {
						break
					}
				}
				f.Sync()
				f.Close()
			}
		}()
	}
	fmt.Println("ready")
	for range writers {
		<-done
	}
	return nil
}

// TestIOLoadBarsNoClient: a well-behaved client (uid 1000) goes
// round a paged 1 MiB allocation, 5 ms between laps — alone never judged
// — while a uid-65534 process writes and fsyncs RT_IOHOG_WRITERS
// (default 4) files of 512 MiB each, over and over, on the disk under the
// test's directory. It must not be dropped, nor its uid barred.
// RT_IOHOG_WRITERS=0 is the control.
func TestIOLoadBarsNoClient(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777), "the stranger writes in the test's directory")
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	writers := rtInt("RT_IOHOG_WRITERS", 4)
	underLoad(t, "1 6 5ms", "iohog", false, fmt.Sprintf("%d 512 8 %s", writers, dir),
		fmt.Sprintf("%d writers in %s", writers, dir))
}
