package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/pytest"
)

// pythonEnv is the environment of an rlctl that runs Python environments:
// DISTRL_PYTHON names an interpreter with pyzmq and msgpack, and a mark
// that every process of the trial inherits lets envHosts find its Python
// environment hosts, even those whose actor is gone.
func pythonEnv(t *testing.T) (env []string, mark string) {
	t.Helper()
	mark = fmt.Sprintf("DISTRL_E2E_MARK=%s-%d", t.Name(), time.Now().UnixNano())
	return append([]string{"DISTRL_PYTHON=" + pytest.Python(t), mark}, noNameServer...), mark
}

// envHosts returns the live Python environment hosts carrying mark, each
// with its parent's pid.
func envHosts(t *testing.T, mark string) map[int]int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	out := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !processAlive(pid) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !bytes.Contains(cmd, []byte("distrl.envhost")) || !bytes.Contains(environ, []byte(mark+"\x00")) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			out[pid], _ = strconv.Atoi(fields[1])
		}
	}
	return out
}

// pycartpole-ppo: PPO learns the Python CartPole (stepped by one host
// process per actor) to the solved bar, as cartpole-ppo does the Go one;
// the environment's numeric info key reaches metrics.jsonl.
func TestStartPyCartPolePPOSolves(t *testing.T) {
	env, mark := pythonEnv(t)
	work := t.TempDir()
	p := start(t, "rlctl-start", env, "start", "pycartpole-ppo", "t1", "--workdir", work,
		"--set", "metrics_interval=300ms", "--set", "stop.wall_time=5m")
	if code := p.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "reached the target 475") {
		t.Fatalf("the run did not stop at the solved bar:\n%s", out)
	}
	dir := filepath.Join(work, "pycartpole-ppo", "t1")
	lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
	last := lines[len(lines)-1]
	if _, ok := last.Workers["actor/0"]["info_x"]; !ok {
		t.Errorf("actor/0's metrics lack the environment's info key x: %v", last.Workers["actor/0"])
	}
	t.Logf("solved to %.1f in %.1fs, version %d, %d env steps", last.MeanReturn, last.ElapsedS, last.Version, last.EnvSteps)
	assertWorkersGone(t, readRecord(t, dir))
	if left := envHosts(t, mark); len(left) > 0 {
		t.Errorf("Python environment hosts left: %v", left)
	}
}

// pyspread-ppo: a PettingZoo-style parallel environment of three agents
// sharing one policy trains end to end; its return rises above a random
// policy's (about -62; learning reaches about -40 within a minute).
func TestStartPySpreadPPOTrains(t *testing.T) {
	env, mark := pythonEnv(t)
	work := t.TempDir()
	p := start(t, "rlctl-start", env, "start", "pyspread-ppo", "t1", "--workdir", work,
		"--set", "stop.env_steps=20000", "--set", "stop.wall_time=3m", "--set", "metrics_interval=300ms")
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	dir := filepath.Join(work, "pyspread-ppo", "t1")
	lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
	if len(lines) == 0 {
		t.Fatal("no metrics lines")
	}
	last := lines[len(lines)-1]
	if last.Version < 2 || last.EnvSteps < 20000 || last.Episodes == 0 {
		t.Fatalf("last metrics: version %d, env steps %d, episodes %d", last.Version, last.EnvSteps, last.Episodes)
	}
	if last.MeanReturn < -55 {
		t.Errorf("mean return %.1f after %d env steps: no better than a random policy (about -62)", last.MeanReturn, last.EnvSteps)
	}
	t.Logf("mean return %.1f after %d env steps, version %d", last.MeanReturn, last.EnvSteps, last.Version)
	assertWorkersGone(t, readRecord(t, dir))
	if left := envHosts(t, mark); len(left) > 0 {
		t.Errorf("Python environment hosts left: %v", left)
	}
}

// A Python environment host dies with its actor, SIGKILL included; the
// restarted actor gets a new one; `rlctl stop` leaves none.
func TestPythonHostsFollowTheirActors(t *testing.T) {
	env, mark := pythonEnv(t)
	work := t.TempDir()
	p := start(t, "rlctl-start", env, "start", "pycartpole-ppo", "t1", "--workdir", work,
		"--set", "metrics_interval=300ms", "--set", "stop.target_return=1000000", "--set", "stop.wall_time=3m")
	waitOutput(t, p, regexp.MustCompile(`all 4 workers running`), 60*time.Second)
	dir := filepath.Join(work, "pycartpole-ppo", "t1")
	rec := readRecord(t, dir)
	hostOf := func(parent int) func() error {
		return func() error {
			for _, pp := range envHosts(t, mark) {
				if pp == parent {
					return nil
				}
			}
			return fmt.Errorf("no host of process %d among %v", parent, envHosts(t, mark))
		}
	}
	actor := rec.Workers["actor/0"]
	eventually.NoError(t, 30*time.Second, "actor/0's host", hostOf(actor))
	var host int
	for pid, pp := range envHosts(t, mark) {
		if pp == actor {
			host = pid
		}
	}
	if err := syscall.Kill(actor, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, "the killed actor's host to die", func() error {
		if processAlive(host) {
			return fmt.Errorf("host %d of the killed actor %d alive", host, actor)
		}
		return nil
	})
	waitOutput(t, p, regexp.MustCompile(`actor/0 restarted`), 60*time.Second)
	eventually.NoError(t, 30*time.Second, "the restarted actor's host", func() error {
		return hostOf(readRecord(t, dir).Workers["actor/0"])()
	})
	out, code := runRlctl(t, nil, "stop", "pycartpole-ppo", "t1", "--workdir", work)
	if code != 0 {
		t.Errorf("rlctl stop: exit %d:\n%s", code, out)
	}
	if code := p.wait(t, 30*time.Second); code != 130 {
		t.Errorf("rlctl start exited with %d after rlctl stop, want 130", code)
	}
	assertWorkersGone(t, readRecord(t, dir))
	if left := envHosts(t, mark); len(left) > 0 {
		t.Errorf("Python environment hosts left after rlctl stop: %v", left)
	}
}

// An environment that raises, hangs or dies mid-run puts its actor in
// ERROR; the controller restarts it, and past max_restarts the trial fails
// with the cause in its message. A module that does not import is refused
// before anything starts (the actor type's configuration check starts the
// environment host once): exit 2, one line saying why, no trial.
func TestStartPythonEnvFailures(t *testing.T) {
	testdata, err := filepath.Abs(filepath.Join("..", "pyenv", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		set       []string
		want      []string
		traceback bool
	}{
		{"raises in step", []string{"workers.actor.config.env_config.module=badenvs",
			"workers.actor.config.env_config.factory=raise_at_step", "workers.actor.config.env_config.path=" + testdata},
			[]string{"failed after 1 restarts", "ValueError: the pole broke at step 3"}, true},
		{"hangs in step", []string{"workers.actor.config.env_config.module=badenvs",
			"workers.actor.config.env_config.factory=hang_at_step", "workers.actor.config.env_config.path=" + testdata,
			"workers.actor.config.env_config.step_timeout_s=1"},
			[]string{"failed after 1 restarts", "did not answer in time"}, false},
		{"process dies", []string{"workers.actor.config.env_config.module=badenvs",
			"workers.actor.config.env_config.factory=die_at_step", "workers.actor.config.env_config.path=" + testdata},
			[]string{"failed after 1 restarts", "python environment host exited (exit status 3"}, false},
		{"module does not import", []string{"workers.actor.config.env_config.module=no_such_module"},
			[]string{"invalid worker configuration: workers.actor.config (actor/0)", "ModuleNotFoundError: No module named 'no_such_module'"}, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, mark := pythonEnv(t)
			work := t.TempDir()
			args := []string{"start", "pycartpole-ppo", fmt.Sprintf("f%d", i), "--workdir", work, "--set", "stop.max_restarts=1"}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			p := start(t, "rlctl-start", env, args...)
			refused := !tt.traceback && strings.Contains(tt.want[0], "invalid worker configuration")
			want := 1
			if refused {
				want = 2
			}
			if code := p.wait(t, 2*time.Minute); code != want {
				t.Fatalf("rlctl start exited with %d, want %d:\n%s", code, want, readFile(t, p.log))
			}
			out := readFile(t, p.log)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if left := envHosts(t, mark); len(left) > 0 {
				t.Errorf("Python environment hosts left: %v", left)
			}
			dir := filepath.Join(work, "pycartpole-ppo", fmt.Sprintf("f%d", i))
			if refused {
				if strings.Count(strings.TrimSpace(out), "\n") > 0 {
					t.Errorf("want one line:\n%s", out)
				}
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("a trial directory was made for a refused configuration")
				}
				return
			}
			// A Python exception's traceback is in the actor's log.
			if log := readFile(t, filepath.Join(dir, "logs", "actor-0.log")); tt.traceback && !strings.Contains(log, "Traceback (most recent call last)") {
				t.Errorf("actor/0's log has no Python traceback:\n%s", log)
			}
			assertWorkersGone(t, readRecord(t, dir))
			if left := envHosts(t, mark); len(left) > 0 {
				t.Errorf("Python environment hosts left: %v", left)
			}
		})
	}
}

// The Python control client (distrl.client) finds a running trial's
// workers through etcd and sends them requests and group requests.
func TestPythonClient(t *testing.T) {
	py := pytest.Python(t)
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-sink", "c1", "--workdir", work,
		"--set", "stop.env_steps=0", "--set", "stop.wall_time=2m")
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	rec := readRecord(t, filepath.Join(work, "cartpole-sink", "c1"))
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	const script = `
import sys
from distrl.client import Trial, RPCError
t = Trial("cartpole-sink", "c1", nameresolve=sys.argv[1])
print(" ".join(t.workers()))
print(t.statuses()["sink/0"]["state"])
print(t.request("actor/0", "ping"))
stats = t.group_request("actor/*", "stats")
print(sorted(stats), all(s["env_steps"] > 0 for s in stats.values()))
try:
    t.request("sink/0", "fly")
except RPCError as e:
    print(e.type)
print(type(t.group_request(["actor/0", "actor/9"], "ping")["actor/9"]).__name__)
`
	cmd := exec.Command(py, "-c", script, rec.NameResolve)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	want := "actor/0 actor/1 ctl policy/0 policy/1 sink/0\nRUNNING\npong\n['actor/0', 'actor/1'] True\nunknown_command\nRPCError\n"
	if string(out) != want {
		t.Errorf("python client printed\n%s\nwant\n%s", out, want)
	}
	if _, code := runRlctl(t, nil, "stop", "cartpole-sink", "c1", "--workdir", work); code != 0 {
		t.Errorf("rlctl stop: exit %d", code)
	}
	p.wait(t, 30*time.Second)
}
