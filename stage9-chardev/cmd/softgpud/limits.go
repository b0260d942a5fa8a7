package main

import (
	"fmt"
	"strconv"
	"strings"
)

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
