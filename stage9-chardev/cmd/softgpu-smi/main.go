// Command softgpu-smi shows what softgpud is doing, as nvidia-smi shows a
// GPU: the device's memory and counters, each engine's load and idle
// state, and the clients using it.
//
//	go run ./stage9-chardev/cmd/softgpu-smi                 # one report
//	go run ./stage9-chardev/cmd/softgpu-smi -l 1            # every second, until ^C
//	go run ./stage9-chardev/cmd/softgpu-smi -json | jq .engines
//
// It is a client of the node like any other, but it never attaches: it
// makes VERSION, then INFO, CLIENT_INFO and CLIENT_QUOTA (each client's
// use of the device-wide pools against its quotas: quota.go) on a
// client.DialControl connection, so it holds no context, no channel and
// no memory, and does not appear among the clients it lists. Rates (commands/s, % of the time asleep) need two
// samples; a report is made from the last two, and the first from two
// taken firstGap apart (sample.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/uapi"
)

// firstGap is the time between the first two samples, when there is no
// earlier one to measure rates from: long enough for the rates to mean
// something, short enough not to keep a person waiting.
const firstGap = 200 * time.Millisecond

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command, with its flags in args; it returns the exit status:
// 0, 1 if the daemon could not be reached or went away, 2 for bad flags.
// With -l it reports until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("softgpu-smi", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {} // Parse's errors are answered below, -h on stdout
	node := flags.String("node", uapi.DefaultNode(), "the device node: softgpud's Unix socket")
	every := flags.Float64("l", 0, "report every `SECONDS` until interrupted; 0: once")
	asJSON := flags.Bool("json", false, "one JSON object per report, for scripts")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h is a question: the answer on stdout, status 0
			flags.SetOutput(stdout)
			usage(flags)
			return 0
		}
		usage(flags)
		return 2
	}
	if *every < 0 || flags.NArg() != 0 {
		usage(flags)
		return 2
	}
	write := writeText
	if *asJSON {
		write = writeJSON
	}
	ctl, err := dial(*node)
	if err != nil {
		fmt.Fprintf(stderr, "softgpu-smi: %v\n", err)
		return 1
	}
	defer func() {
		if ctl != nil {
			ctl.Close()
		}
	}()

	prev, err := take(ctl, *node)
	gap := firstGap
	for {
		if err == nil {
			err = sleep(ctx, gap)
		}
		var cur sample
		if err == nil {
			cur, err = take(ctl, *node)
		}
		if errors.Is(err, client.ErrGone) && ctx.Err() == nil {
			// The daemon drops a connection that goes -attach-timeout
			// without attaching or calling, as this one may between two
			// reports: dial again, once. A daemon that has gone fails it.
			ctl.Close()
			if ctl, err = dial(*node); err == nil {
				cur, err = take(ctl, *node)
			}
		}
		if ctx.Err() != nil {
			return 0 // interrupted: the normal end of -l
		}
		if err != nil {
			fmt.Fprintf(stderr, "softgpu-smi: %s: %v\n", *node, err)
			return 1
		}
		if err := write(stdout, prev, cur); err != nil {
			fmt.Fprintf(stderr, "softgpu-smi: %v\n", err)
			return 1
		}
		if *every == 0 {
			return 0
		}
		if !*asJSON {
			fmt.Fprintln(stdout) // a blank line between reports
		}
		prev, gap = cur, time.Duration(*every*float64(time.Second))
	}
}

// usage writes what softgpu-smi does and its flags to the flag set's
// output.
func usage(flags *flag.FlagSet) {
	fmt.Fprint(flags.Output(), `usage: softgpu-smi [-node PATH] [-l SECONDS] [-json]

Shows what softgpud is doing: the device's memory and counters, each
engine's load and idle state, the clients using it. Its memory total is
what clients can allocate: softgpud -mem less the page-table pool, which
takes 1/16 of device memory (at least 32 KiB), and the runlists' area.

`)
	flags.PrintDefaults()
}

// dial connects to the daemon, saying plainly when there is none.
func dial(node string) (*client.Control, error) {
	ctl, err := client.DialControl(node)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		// No socket at the path, or a stale one nobody listens on.
		return nil, fmt.Errorf("no daemon at %s: is softgpud running?", node)
	}
	return ctl, err
}

// sleep waits for d, or returns ctx's error if ctx is done first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
