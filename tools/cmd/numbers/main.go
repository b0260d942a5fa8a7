// Command numbers writes the READMEs' tables of measured figures from the
// records in book/records (package softgpu/tools/internal/numbers says how
// a README names its rows):
//
//	go run ./tools/cmd/numbers           # rewrite every stale table
//	go run ./tools/cmd/numbers -check    # only list them; exit 1 if any
//
// Run it after the records are re-taken, beside the book build: a test in
// tools/internal/numbers fails while any README quotes figures the records
// no longer hold.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"softgpu/tools/internal/cli"
	"softgpu/tools/internal/numbers"
	"softgpu/tools/internal/stages"
)

func main() {
	cli.Main(func(ctx context.Context) int { return run(os.Args[1:], os.Stdout, os.Stderr) })
}

const usage = `usage: go run ./tools/cmd/numbers [-check]

Writes the table of every numbers block in README.md and each stage's
README.md from book/records, and prints each README it changed. -check
changes nothing: it prints the READMEs whose tables are stale and exits 1
if there are any. A spec that names a record, row or unit that does not
exist is an error either way.
`

func run(args []string, stdout, stderr io.Writer) int {
	c := cli.NewCommand("numbers", usage, stdout, stderr)
	check := c.Flags.Bool("check", false, "change nothing; list the stale READMEs and exit 1 if there are any")
	rest, code, done := c.Parse(args)
	if done {
		return code
	}
	if len(rest) > 0 {
		return c.Misuse("unexpected argument %q", rest[0])
	}
	root, err := stages.Root()
	if err != nil {
		return c.Fail(err)
	}
	stale, err := numbers.Sync(root, !*check)
	for _, rel := range stale {
		if *check {
			fmt.Fprintf(stdout, "stale: %s (run: go run ./tools/cmd/numbers)\n", rel)
		} else {
			fmt.Fprintf(stdout, "wrote %s\n", rel)
		}
	}
	if err != nil {
		return c.Fail(err)
	}
	if *check && len(stale) > 0 {
		return cli.ExitFailed
	}
	return cli.ExitOK
}
