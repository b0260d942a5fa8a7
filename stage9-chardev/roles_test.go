package softgpu_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	softgpu "softgpu/stage9-chardev"
	"softgpu/stage9-chardev/client"
	"softgpu/stage9-chardev/driver"
	"softgpu/stage9-chardev/server"
)

// The benchmarks that cross the boundary need other processes: a daemon,
// and for Clients several client processes. Each is this test binary run
// again, in a role its environment names; TestMain sends it there instead
// of to the tests.
const (
	roleDaemon = "SOFTGPU_BENCH_DAEMON" // the node to serve
	roleClient = "SOFTGPU_BENCH_CLIENT" // the node to use; SOFTGPU_BENCH_OPS says how many fills
	roleOps    = "SOFTGPU_BENCH_OPS"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(roleDaemon) != "":
		os.Exit(daemonRole(os.Getenv(roleDaemon)))
	case os.Getenv(roleClient) != "":
		os.Exit(clientRole(os.Getenv(roleClient)))
	}
	os.Exit(m.Run())
}

// daemonRole serves node until its standard input closes — the parent
// closed it, or died — and prints "ready" once it accepts clients.
func daemonRole(node string) int {
	cfg := server.Config{Node: node, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Device.MemorySize = 64 << 20
	idle, err := idleModeFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Driver.Idle = idle
	cfg.Trace = os.Getenv("SOFTGPU_TRACE") // the device a benchmark across the boundary drives is this one: trace make traces it
	s, err := server.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go s.Serve()
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// clientRole connects to node, prints "ready", waits for a line on its
// standard input, runs SOFTGPU_BENCH_OPS fills of 64 bytes in batches of
// eight on its copy channel, each batch waited for, checks the bytes, and
// prints "done".
func clientRole(node string) int {
	ops, err := strconv.Atoi(os.Getenv(roleOps))
	if err != nil || ops < 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: not a count\n", roleOps, os.Getenv(roleOps))
		return 1
	}
	g, err := client.Dial(node)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer g.Close()
	dst, err := g.Alloc(64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	batch := g.NewBatch(softgpu.Copy)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	const per = 8
	for done := 0; done < ops; {
		for range min(per, ops-done) {
			batch.Fill(dst, 64, byte(done))
			done++
		}
		p, err := batch.Submit()
		if err == nil {
			err = p.Wait()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	got := make([]byte, 64)
	if err := g.Read(got, dst); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if want := byte(ops - 1); ops > 0 && got[0] != want {
		fmt.Fprintf(os.Stderr, "the last fill left %#x; want %#x\n", got[0], want)
		return 1
	}
	fmt.Println("done")
	return 0
}

// idleModeFromEnv is the idle configuration SOFTGPU_IDLE names, for a
// daemon started by a benchmark: the variables openBench reads, so that
// a run is configured one way on both sides of the boundary.
func idleModeFromEnv() (driver.Idle, error) {
	var cfg softgpu.Config
	err := idleEnv(&cfg)
	return driver.Idle{Mode: cfg.Idle, Budget: cfg.IdleBudget}, err
}

// child is a process in a role, with a line-reader on its output.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startRole runs this binary in a role (env), and waits for its "ready".
func startRole(tb testing.TB, env ...string) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	c.expect(tb, "ready")
	return c
}

// expect reads the child's next line and fails unless it is want.
func (c *child) expect(tb testing.TB, want string) {
	tb.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := c.out.ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case got := <-line:
		if got != want {
			c.cmd.Process.Kill()
			tb.Fatalf("%v: said %q; want %q", c.cmd.Env[len(c.cmd.Env)-1], got, want)
		}
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		tb.Fatalf("%v: no %q in 30 s", c.cmd.Env[len(c.cmd.Env)-1], want)
	}
}

// stop closes the child's input, which ends its role, and waits for it.
func (c *child) stop(tb testing.TB) {
	tb.Helper()
	c.stdin.Close()
	assert.NoError(tb, c.cmd.Wait(), "%v", c.cmd.Env[len(c.cmd.Env)-1])
}

// startDaemon runs a daemon in another process on a node of its own, for
// the rest of the benchmark.
func startDaemon(tb testing.TB) string {
	tb.Helper()
	node := filepath.Join(tb.TempDir(), "card0")
	d := startRole(tb, roleDaemon+"="+node)
	tb.Cleanup(func() { d.stop(tb) })
	return node
}
