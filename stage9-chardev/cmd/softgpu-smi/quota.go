package main

import (
	"fmt"
	"io"

	"softgpu/stage9-chardev/uapi"
)

// This file shows each client's use of the device-wide pools against its
// quotas (CLIENT_QUOTA, since uapi 2.1; server/quota.go): its own use
// against the per-client limit, and its uid's — every client of that
// user, together — against the per-uid limit. Every daemon this tool can
// negotiate with (major version 3) has the call.

// quotaReport is one client's quotas, pool by pool.
type quotaReport struct {
	DeviceMemory poolReport `json:"device_memory_bytes"`
	PinnedBytes  poolReport `json:"pinned_bytes"`
	Window       poolReport `json:"window_entries"`
	Contexts     poolReport `json:"contexts"`
	Channels     poolReport `json:"channels"`
	PageTables   poolReport `json:"page_table_pages"` // since uapi 2.3
}

// poolReport is one pool of one client: its use and limit, and its uid's.
type poolReport struct {
	Use      uint64 `json:"use"`
	Limit    uint64 `json:"limit"`
	UidUse   uint64 `json:"uid_use"`
	UidLimit uint64 `json:"uid_limit"`
}

// takeQuotas reads every client's CLIENT_QUOTA.
func (s *sample) takeQuotas(quotas func() ([]uapi.ClientQuota, error)) error {
	var err error
	s.quotas, err = quotas()
	if err != nil {
		return fmt.Errorf("CLIENT_QUOTA: %w", err)
	}
	return nil
}

// quotaOf returns the quota report of the client with pid and context,
// or nil if the sample has none (a client that came between CLIENT_INFO
// and CLIENT_QUOTA).
func (s *sample) quotaOf(pid, context uint32) *quotaReport {
	for _, q := range s.quotas {
		if q.Pid != pid || q.Context != context {
			continue
		}
		pool := func(use, limit, uidUse, uidLimit uint64) poolReport {
			return poolReport{Use: use, Limit: limit, UidUse: uidUse, UidLimit: uidLimit}
		}
		return &quotaReport{
			DeviceMemory: pool(q.Use.DeviceMemory, q.Limit.DeviceMemory, q.UidUse.DeviceMemory, q.UidLimit.DeviceMemory),
			PinnedBytes:  pool(q.Use.PinnedBytes, q.Limit.PinnedBytes, q.UidUse.PinnedBytes, q.UidLimit.PinnedBytes),
			Window: pool(uint64(q.Use.WindowEntries), uint64(q.Limit.WindowEntries),
				uint64(q.UidUse.WindowEntries), uint64(q.UidLimit.WindowEntries)),
			Contexts: pool(uint64(q.Use.Contexts), uint64(q.Limit.Contexts), uint64(q.UidUse.Contexts), uint64(q.UidLimit.Contexts)),
			Channels: pool(uint64(q.Use.Channels), uint64(q.Limit.Channels), uint64(q.UidUse.Channels), uint64(q.UidLimit.Channels)),
			PageTables: pool(uint64(q.Use.PageTables), uint64(q.Limit.PageTables),
				uint64(q.UidUse.PageTables), uint64(q.UidLimit.PageTables)),
		}
	}
	return nil
}

// writeQuotas prints the quotas table: a row per client with its use and
// limit of each pool, and beneath it a row for its uid.
//
//	QUOTA      DEVICE MEM          PINNED               WINDOW  CONTEXTS  CHANNELS  TABLE PAGES
//	pid 4242   1.0 MiB/16.0 MiB    64.0 KiB/11.7 GiB    1/32    1/1       2/126     5/109
//	 uid 1000  1.0 MiB/16.0 MiB    64.0 KiB/11.7 GiB    1/32    1/63      2/126     5/217
//
// TABLE PAGES counts pages of 4 KiB of the page-table pool, as the limits
// and softgpud's -client-tables and -uid-tables do, not tables: a root
// takes two pages.
func writeQuotas(w io.Writer, clients []clientReport) {
	header := false
	for _, c := range clients {
		q := c.Quota
		if q == nil || c.Withheld {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nQUOTA\tDEVICE MEM\tPINNED\tWINDOW\tCONTEXTS\tCHANNELS\tTABLE PAGES\n")
			header = true
		}
		bytes := func(use, limit uint64) string { return byteSize(use) + "/" + byteSize(limit) }
		count := func(use, limit uint64) string { return fmt.Sprintf("%d/%d", use, limit) }
		fmt.Fprintf(w, "pid %d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Pid,
			bytes(q.DeviceMemory.Use, q.DeviceMemory.Limit), bytes(q.PinnedBytes.Use, q.PinnedBytes.Limit),
			count(q.Window.Use, q.Window.Limit), count(q.Contexts.Use, q.Contexts.Limit), count(q.Channels.Use, q.Channels.Limit),
			count(q.PageTables.Use, q.PageTables.Limit))
		fmt.Fprintf(w, " uid %d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Uid,
			bytes(q.DeviceMemory.UidUse, q.DeviceMemory.UidLimit), bytes(q.PinnedBytes.UidUse, q.PinnedBytes.UidLimit),
			count(q.Window.UidUse, q.Window.UidLimit), count(q.Contexts.UidUse, q.Contexts.UidLimit), count(q.Channels.UidUse, q.Channels.UidLimit),
			count(q.PageTables.UidUse, q.PageTables.UidLimit))
	}
}
