package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"softgpu/stage9-chardev/abi"
	"softgpu/stage9-chardev/server"
)

// quotaFlags defines the quota flags, -client-X and -uid-X for each pool
// (server/quota.go), on fs, filling client and uid when fs is parsed.
// Zero leaves a limit at its default.
func quotaFlags(fs *flag.FlagSet, client, uid *server.Quota) {
	for _, q := range []struct {
		who   string
		quota *server.Quota
		what  string
	}{{"client", client, "one client"}, {"uid", uid, "all the clients of one uid together"}} {
		fs.Uint64Var(&q.quota.DeviceMemory, q.who+"-memory", 0, "bytes of device memory "+q.what+" may allocate (0: all of it)")
		fs.Uint64Var(&q.quota.PinnedBytes, q.who+"-pinned", 0, "bytes of host memory "+q.what+" may have locked, a sparse memfd's every byte counted (0: RLIMIT_MEMLOCK, or half the RAM if unlimited)")
		fs.IntVar(&q.quota.WindowEntries, q.who+"-window", 0, fmt.Sprintf("DMA window entries %s may hold, fewer than the device's %d (0: half of them)", q.what, abi.WindowSlots))
		fs.IntVar(&q.quota.Channels, q.who+"-channels", 0, "channels "+q.what+" may have open (0: every channel the driver does not keep)")
	}
	rootPages := abi.RootBytes >> abi.PageShift
	fs.IntVar(&client.PageTables, "client-tables", 0, fmt.Sprintf("pages of 4 KiB of the page-table pool one client's tables may take, its root's %d included, and no fewer (0: the pool's free pages less a root for every other context, but at least half of them)", rootPages))
	fs.IntVar(&uid.PageTables, "uid-tables", 0, fmt.Sprintf("pages of 4 KiB of the page-table pool all the clients of one uid together may take, a root's %d for each (0: all the pool's free pages)", rootPages))
	fs.IntVar(&uid.Contexts, "uid-contexts", 0, "contexts (attached connections) all the clients of one uid may have together (0: every context the driver does not keep)")
}

// uidList is a flag of comma-separated uids: -priority-uids 1000,1001.
type uidList []uint32

func (l *uidList) String() string {
	parts := make([]string, len(*l))
	for i, uid := range *l {
		parts[i] = strconv.FormatUint(uint64(uid), 10)
	}
	return strings.Join(parts, ",")
}

func (l *uidList) Set(s string) error {
	*l = (*l)[:0]
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		uid, err := strconv.ParseUint(part, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a uid", part)
		}
		*l = append(*l, uint32(uid))
	}
	return nil
}
