package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
	if testing.Short() {
		t.Skip("builds softgpud")
	}
	cred, _ := strangerCred()
	if cred == nil {
		t.Skip("the stranger must be of another uid, and only root can make it so")
	}
	writers := 4
	if v, err := strconv.Atoi(os.Getenv("RT_IOHOG_WRITERS")); err == nil {
		writers = v
	}
	dir := t.TempDir()
	require := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	require(os.Chmod(dir, 0o777))
	require(os.Chmod(filepath.Dir(dir), 0o755))
	d := startDaemon(t)
	lines, ended := runVictim(t, d, "1 6 5ms", func() {
		s := startStranger(t, "iohog", "", fmt.Sprintf("%d 512 8 %s", writers, dir), cred)
		s.until(t, "ready")
	})
	t.Logf("%d writers of uid %d in %s", writers, cred.Uid, dir)
	judgedVictim(t, d, lines, ended)
	d.stop(t)
}
