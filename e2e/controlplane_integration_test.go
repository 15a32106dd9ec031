package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// waitRegistered waits until every named worker answers ping through rlctl.
func (c *cluster) waitRegistered(workers ...string) {
	c.t.Helper()
	for _, w := range workers {
		eventually.NoError(c.t, 20*time.Second, w+" answers ping", func() error {
			out, errOut, code := c.rlctl("request", "--timeout", "2s", w, "ping")
			if code != 0 || strings.TrimSpace(out) != `"pong"` {
				return fmt.Errorf("code %d out %q err %q", code, out, errOut)
			}
			return nil
		})
	}
}

func TestEndToEndEchoWorkers(t *testing.T) {
	c := newCluster(t)
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = c.worker("echo", i)
	}
	c.waitRegistered("echo/0", "echo/1", "echo/2")

	t.Run("request with kwargs", func(t *testing.T) {
		out, errOut, code := c.rlctl("request", "echo/1", "echo", "msg=hello", "n=3", `v=[1,2.5]`)
		if code != 0 {
			t.Fatalf("code %d: %s", code, errOut)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("reply %q is not JSON: %v", out, err)
		}
		if got["msg"] != "hello" || got["n"] != 3.0 || fmt.Sprint(got["v"]) != "[1 2.5]" {
			t.Fatalf("echo reply %v", got)
		}
	})
	t.Run("remote error exits non-zero with type and message", func(t *testing.T) {
		_, errOut, code := c.rlctl("request", "echo/0", "fly")
		if code == 0 || !strings.Contains(errOut, "unknown_command") {
			t.Fatalf("code %d stderr %q", code, errOut)
		}
		_, errOut, code = c.rlctl("request", "echo/0", "start")
		if code == 0 || !strings.Contains(errOut, worker.ErrTypeBadState) {
			t.Fatalf("start before configure: code %d stderr %q", code, errOut)
		}
	})
	t.Run("unknown worker", func(t *testing.T) {
		_, errOut, code := c.rlctl("request", "echo/7", "ping")
		if code == 0 || !strings.Contains(errOut, "not found") {
			t.Fatalf("code %d stderr %q", code, errOut)
		}
	})
	t.Run("group request from the CLI", func(t *testing.T) {
		out, errOut, code := c.rlctl("request", "echo/*", "configure", "x=1")
		if code != 0 {
			t.Fatalf("code %d: %s", code, errOut)
		}
		var got map[string]member.Status
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 {
			t.Fatalf("group reply %q: %v", out, err)
		}
		for name, st := range got {
			if st.State != member.StateConfigured {
				t.Fatalf("%s: %+v", name, st)
			}
		}
	})
	t.Run("group request from a control panel", func(t *testing.T) {
		panel := c.panel()
		names, err := panel.AutoConnect(ctxFor(t, 10*time.Second))
		if err != nil || len(names) != 3 {
			t.Fatalf("AutoConnect = %v, %v", names, err)
		}
		for _, r := range panel.GroupRequest(ctxFor(t, 10*time.Second), names, "start", nil) {
			var st member.Status
			if err := r.Decode(&st); err != nil || st.State != member.StateRunning {
				t.Fatalf("%s start: %+v %v", r.Worker, st, err)
			}
		}
	})
	t.Run("ls", func(t *testing.T) {
		out, errOut, code := c.rlctl("ls")
		if code != 0 {
			t.Fatalf("ls: code %d: %s", code, errOut)
		}
		for i := 0; i < 3; i++ {
			if !containsLine(out, fmt.Sprintf("echo/%d", i), "127.0.0.1:", "RUNNING") {
				t.Fatalf("ls output lacks echo/%d RUNNING:\n%s", i, out)
			}
		}
	})
	t.Run("exit", func(t *testing.T) {
		if _, errOut, code := c.rlctl("request", "echo/2", "exit"); code != 0 {
			t.Fatalf("exit: %s", errOut)
		}
		if code := procs[2].wait(t, 10*time.Second); code != 0 {
			t.Fatalf("echo/2 exit code %d", code)
		}
		out, _, _ := c.rlctl("ls")
		if !containsLine(out, "echo/2", "COMPLETED") || containsLine(out, "echo/2", "127.0.0.1:") {
			t.Fatalf("after exit, ls should show echo/2 COMPLETED without address:\n%s", out)
		}
	})
	t.Run("SIGTERM exits gracefully", func(t *testing.T) {
		procs[1].signal(t, syscall.SIGTERM)
		if code := procs[1].wait(t, 10*time.Second); code != 0 {
			t.Fatalf("echo/1 exit code %d after SIGTERM", code)
		}
		st, err := c.panel().WorkerStatus(ctxFor(t, 5*time.Second), "echo/1")
		if err != nil || st.State != member.StateInterrupted || st.Address != "" {
			t.Fatalf("after SIGTERM: %+v %v", st, err)
		}
	})
}

func containsLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestKilledWorkerIsLost(t *testing.T) {
	c := newCluster(t)
	const ttl = 2 * time.Second
	p := c.worker("echo", 0, "--ttl", ttl.String())
	c.waitRegistered("echo/0")
	panel := c.panel()
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 5*time.Second)
	killed := time.Now()
	// The lease bounds it at TTL (+ etcd's expiry sweep); the assertion allows
	// a loaded machine more, and the log line reports what it took.
	eventually.NoError(t, ttl+8*time.Second, "echo/0 LOST", func() error {
		st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), "echo/0")
		if err != nil {
			return err
		}
		if st.State != member.StateLost {
			return fmt.Errorf("state %s", st.State)
		}
		return nil
	})
	t.Logf("LOST %v after SIGKILL (lease TTL %v)", time.Since(killed).Round(10*time.Millisecond), ttl)
}

func TestDuplicateWorkerRefused(t *testing.T) {
	c := newCluster(t)
	c.worker("echo", 0)
	c.waitRegistered("echo/0")
	second := c.worker("echo", 0)
	if code := second.wait(t, 20*time.Second); code == 0 {
		t.Fatal("a second echo/0 started")
	}
	if out := readFile(t, second.log); !strings.Contains(out, "already taken") {
		t.Fatalf("second worker's message should say the name is taken:\n%s", out)
	}
	c.waitRegistered("echo/0") // the first one is untouched
}

func TestUnreachableNameServer(t *testing.T) {
	c := &cluster{t: t, env: []string{"RLCTL_NAMERESOLVE=127.0.0.1:1", "RLCTL_EXPERIMENT=e", "RLCTL_TRIAL=t"}}
	begin := time.Now()
	_, errOut, code := c.rlctl("ls")
	if code == 0 {
		t.Fatal("ls against no etcd succeeded")
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("want one clear line about the unreachable name server, got:\n%s", errOut)
	}
	t.Logf("failed in %v: %s", time.Since(begin).Round(time.Millisecond), errOut)
}

func TestNameServerRestart(t *testing.T) {
	c := newCluster(t)
	const ttl = 2 * time.Second
	for i := 0; i < 2; i++ {
		c.worker("echo", i, "--ttl", ttl.String())
	}
	c.waitRegistered("echo/0", "echo/1")
	endpoint := c.endpoint

	c.ns.signal(t, syscall.SIGKILL)
	c.ns.wait(t, 10*time.Second)
	time.Sleep(ttl + time.Second) // every lease has expired by the time etcd is back
	c.startNameServer(endpoint)
	if c.endpoint != endpoint {
		t.Fatalf("restarted on %s, want %s", c.endpoint, endpoint)
	}
	// The workers re-establish their leases and records; they are found and answer.
	c.waitRegistered("echo/0", "echo/1")
	out, _, _ := c.rlctl("ls")
	if !containsLine(out, "echo/0", "READY") || !containsLine(out, "echo/1", "READY") {
		t.Fatalf("after the restart ls shows:\n%s", out)
	}
}

func TestCurveKeys(t *testing.T) {
	c := newCluster(t)
	keys := t.TempDir() + "/keys.json"
	if _, errOut, code := c.rlctl("keygen", keys); code != 0 {
		t.Fatalf("keygen: %s", errOut)
	}
	c.worker("echo", 0, "--curve-keys", keys)
	withKeys := append([]string{"--curve-keys", keys}, "request", "--timeout", "2s")
	eventually.NoError(t, 20*time.Second, "echo/0 answers a client with the key", func() error {
		out, errOut, code := c.rlctl(append(withKeys, "echo/0", "ping")...)
		if code != 0 || strings.TrimSpace(out) != `"pong"` {
			return fmt.Errorf("code %d out %q err %q", code, out, errOut)
		}
		return nil
	})
	out, errOut, code := c.rlctl("request", "--timeout", "1s", "echo/0", "ping")
	if code == 0 || out != "" || !strings.Contains(errOut, "deadline exceeded") {
		t.Fatalf("a client without the key: code %d out %q err %q", code, out, errOut)
	}
}

// `rlctl worker --count` hosts many workers in one process: each answers
// as itself, goes through its lifecycle, and SIGTERM interrupts them all.
func TestWorkerHostCount(t *testing.T) {
	c := newCluster(t)
	const n = 16
	p := c.worker("echo", 3, "--count", fmt.Sprint(n))
	panel := c.panel()
	ctx := ctxFor(t, 30*time.Second)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("echo/%d", 3+i)
	}
	if err := panel.Connect(ctx, names...); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
		for _, r := range panel.GroupRequest(ctx, names, cmd, map[string]any{"n": 1}) {
			if r.Err != nil {
				t.Fatalf("%s: %v", cmd, r.Err)
			}
		}
	}
	each := make([]any, n)
	for i := range each {
		each[i] = map[string]any{"i": i}
	}
	for i, r := range panel.GroupRequestEach(ctx, names, "echo", each) {
		var got map[string]int
		if err := r.Decode(&got); err != nil || got["i"] != i {
			t.Fatalf("%s echoed %v, %v; want i=%d", r.Worker, got, err, i)
		}
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("host exit code %d after SIGTERM", code)
	}
	for _, name := range names {
		st, err := panel.WorkerStatus(ctx, name)
		if err != nil || st.State != member.StateInterrupted || st.Address != "" {
			t.Fatalf("%s after SIGTERM: %+v %v", name, st, err)
		}
	}
}

// A panel resolves names through a mirror of the address records that a
// watch keeps, synced once per request: a worker host that stops and comes
// back at another address is reached there by the next group or plain
// request (the old address is dead; a request sent there would wait out
// its deadline). That a Sync closes the gap however late the watch event
// is nameresolve's conformance test (MirrorConcurrentSync).
func TestPanelFollowsRestartedHost(t *testing.T) {
	c := newCluster(t)
	panel := c.panel()
	repo := c.repo()
	workers := []string{"echo/0", "echo/1"}
	ping := func(when string) {
		t.Helper()
		ctx := ctxFor(t, 5*time.Second)
		for _, r := range panel.GroupRequest(ctx, workers, "ping", nil) {
			if r.Err != nil {
				t.Fatalf("group ping %s: %v", when, r.Err)
			}
		}
		if err := panel.Request(ctx, "echo/1", "ping", nil, nil); err != nil {
			t.Fatalf("ping %s: %v", when, err)
		}
	}
	moved := 0
	var last string
	for round := range 4 {
		p := c.worker("echo", 0, "--count", "2")
		// The stopped host deleted its records on exit: a record is the new
		// host's. It registers its workers one after the other, in no set
		// order: wait for both.
		var addr string
		eventually.NoError(t, 20*time.Second, "the host registers", func() error {
			for _, w := range workers {
				var err error
				if addr, err = repo.Get(ctxFor(t, 5*time.Second), c.trial.Worker(w)); err != nil {
					return err
				}
			}
			return nil
		})
		if addr != last {
			moved++
		}
		last = addr
		ping(fmt.Sprintf("after start %d", round))
		p.signal(t, syscall.SIGTERM)
		p.wait(t, 10*time.Second)
	}
	if moved < 2 {
		t.Fatalf("the host came back at the same address every time (%s): nothing moved", last)
	}
}
