package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/slurmtest"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/panel"
	zmq "github.com/pebbe/zmq4"
)

// rlctl is the binary under test, built once by TestMain; E2E_RLCTL names
// another one instead (to measure an older build with the same tests).
var rlctl = os.Getenv("E2E_RLCTL")

// maxPanelSockets: 4096 workers and some to spare.
const maxPanelSockets = 8192

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "distrl-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The control-plane benchmarks hold a connection to each of thousands
	// of workers; libzmq's default cap is 1023 sockets per process.
	if err := zmq.SetMaxSockets(maxPanelSockets); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if rlctl == "" {
		rlctl = filepath.Join(dir, "rlctl")
		if err := buildRlctl(rlctl, ""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	slurmtest.TearDown()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildRlctl builds cmd/rlctl with the build tags (none: "") into path; its
// error carries what the build printed.
func buildRlctl(path, tags string) error {
	args := []string{"build", "-o", path}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command("go", append(args, "github.com/distrl/distrl/cmd/rlctl")...).CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", filepath.Base(path), err, out)
	}
	return nil
}

// proc is a background rlctl process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs rlctl args in the background with env added; the process is
// killed when the test ends and its log printed if the test failed.
func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, rlctl, name, env, args...)
}

// startBinary is start with another binary than rlctl (rlctl-cuda).
func startBinary(t testing.TB, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	log := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "-")+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			out, _ := os.ReadFile(log)
			t.Logf("--- log of %s:\n%s", name, out)
		}
	})
	return p
}

func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return 0
}

// waitSuccess waits for the process to exit and fails t, with its log,
// unless it exits with 0.
func (p *proc) waitSuccess(t testing.TB, timeout time.Duration) {
	t.Helper()
	if code := p.wait(t, timeout); code != 0 {
		t.Fatalf("%s exited with %d:\n%s", p.name, code, readFile(t, p.log))
	}
}

// cluster is a name server and the environment that points rlctl at it.
type cluster struct {
	t        testing.TB
	dataDir  string
	endpoint string
	ns       *proc
	env      []string
	trial    names.Trial
}

var trialSeq struct {
	sync.Mutex
	n int
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	return newClusterAt(t, "127.0.0.1:0")
}

// newClusterAt is newCluster with the name server listening at listen.
func newClusterAt(t testing.TB, listen string) *cluster {
	t.Helper()
	trialSeq.Lock()
	trialSeq.n++
	n := trialSeq.n
	trialSeq.Unlock()
	c := &cluster{t: t, dataDir: filepath.Join(t.TempDir(), "etcd"), trial: names.NewTrial("e2e", fmt.Sprintf("t%d", n))}
	c.startNameServer(listen)
	return c
}

// startNameServer starts `rlctl nameserver` and reads the endpoint it prints.
func (c *cluster) startNameServer(listen string) {
	c.t.Helper()
	c.ns = start(c.t, "nameserver", nil, "nameserver", "--listen", listen, "--data-dir", c.dataDir)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ep := readEndpoint(c.ns.log); ep != "" {
			c.endpoint = ep
			c.env = []string{
				"RLCTL_NAMERESOLVE=" + ep, "RLCTL_EXPERIMENT=" + c.trial.Experiment, "RLCTL_TRIAL=" + c.trial.Trial,
			}
			return
		}
		select {
		case <-c.ns.done:
			c.t.Fatalf("nameserver exited: %v", c.ns.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.t.Fatal("nameserver did not print its endpoint")
}

func readEndpoint(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "nameserver listening on "); ok {
			return strings.Fields(rest)[0]
		}
	}
	return ""
}

// worker starts `rlctl worker --type typ --index i` with extra flags.
func (c *cluster) worker(typ string, index int, flags ...string) *proc {
	return c.workerOf(rlctl, typ, index, flags...)
}

// workerOf is worker run by another binary than rlctl (rlctl-cuda).
func (c *cluster) workerOf(bin, typ string, index int, flags ...string) *proc {
	args := append([]string{"worker", "--type", typ, "--index", fmt.Sprint(index), "--host", "127.0.0.1"}, flags...)
	return startBinary(c.t, bin, names.WorkerName(typ, index), c.env, args...)
}

// rlctl runs one rlctl command to completion.
func (c *cluster) rlctl(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return runOutputs(c.t, 30*time.Second, c.env, args...)
}

// runOutputs runs rlctl args with env added, for at most timeout, and
// returns its stdout, its stderr and its exit code.
func runOutputs(t testing.TB, timeout time.Duration, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rlctl, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("rlctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// repo opens the cluster's etcd from the test process, closed when the
// test ends.
func (c *cluster) repo() *etcd.Repository {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{c.endpoint}})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { repo.Close() })
	return repo
}

// panel opens a control panel on the cluster's etcd from the test process.
func (c *cluster) panel() *panel.ControlPanel {
	c.t.Helper()
	p := panel.New(c.repo(), c.trial, panel.Options{})
	c.t.Cleanup(func() { p.Close() })
	return p
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
