package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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

	"github.com/distrl/distrl/internal/ckptfile"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve/etcd"
)

// noNameServer points rlctl at a port nobody listens on, so `rlctl start`
// runs its own embedded etcd whatever runs on the default port.
var noNameServer = []string{"RLCTL_NAMERESOLVE=127.0.0.1:1"}

// controllerRecord is the part of controller.json the tests read.
type controllerRecord struct {
	PID         int            `json:"pid"`
	State       string         `json:"state"`
	Message     string         `json:"message"`
	NameResolve string         `json:"nameresolve"`
	Workers     map[string]int `json:"workers"`
}

// metricsLine is the part of a metrics.jsonl line the tests read.
type metricsLine struct {
	Time       time.Time `json:"time"`
	ElapsedS   float64   `json:"elapsed_s"`
	EnvSteps   int64     `json:"env_steps"`
	StepsPerS  float64   `json:"steps_per_s"`
	Episodes   int64     `json:"episodes"`
	Restarts   int       `json:"restarts"`
	MeanReturn float64   `json:"mean_return"`
	// ReturnEpisodes is how many episodes MeanReturn covers (0: no
	// episode had ended, and MeanReturn is absent).
	ReturnEpisodes int64 `json:"return_episodes"`
	Version        int64 `json:"version"`
	// ReplaySize and SamplesPerInsert: the replay workers' (cartpole-apex).
	ReplaySize       int64   `json:"replay_size"`
	SamplesPerInsert float64 `json:"samples_per_insert"`
	// BestVersion: the evaluators' best (connect4-selfplay-ppo).
	BestVersion *int64                    `json:"best_version"`
	Workers     map[string]map[string]any `json:"workers"`
}

func readRecord(t testing.TB, dir string) controllerRecord {
	t.Helper()
	var r controllerRecord
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "controller.json"))), &r); err != nil {
		t.Fatalf("controller.json: %v", err)
	}
	return r
}

// readMetricsLines reads the whole lines of a metrics.jsonl; a last line
// without its newline is one the controller is still writing (a running
// trial's file is read while it grows), and is left for the next read.
func readMetricsLines(t testing.TB, path string) []metricsLine {
	t.Helper()
	var out []metricsLine
	text := readFile(t, path)
	text = text[:strings.LastIndexByte(text, '\n')+1]
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 16<<20)
	for i := 1; sc.Scan(); i++ {
		var m metricsLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s line %d: %v: %s", path, i, err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// waitOutput waits until the process's output matches re and returns the match.
func waitOutput(t testing.TB, p *proc, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(p.log)
		if m := re.FindStringSubmatch(string(b)); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q:\n%s", p.name, p.err, re, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, re, timeout, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// assertWorkersGone checks that no worker process of the record is alive.
func assertWorkersGone(t testing.TB, rec controllerRecord) {
	t.Helper()
	if len(rec.Workers) == 0 {
		t.Fatal("controller.json names no workers")
	}
	for name, pid := range rec.Workers {
		if processAlive(pid) {
			t.Errorf("worker %s (pid %d) still runs after the controller exited", name, pid)
		}
	}
}

// runRlctl runs one rlctl command with env to completion.
func runRlctl(t testing.TB, env []string, args ...string) (out string, code int) {
	t.Helper()
	cmd := exec.Command(rlctl, args...)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("rlctl %v: %v", args, err)
	}
	return string(b), code
}

// cartpole-sink runs to its env step limit with its own etcd, leaves
// well-formed metrics, no processes and a plot.
func TestStartRunsToCompletion(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-sink", "t1", "--workdir", work,
		"--set", "stop.env_steps=20000", "--set", "metrics_interval=300ms")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	dir := filepath.Join(work, "cartpole-sink", "t1")
	out := readFile(t, p.log)
	for _, want := range []string{"embedded etcd", "all 5 workers running", "completed: ", "env steps reached"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rec := readRecord(t, dir)
	if rec.State != "completed" {
		t.Errorf("controller.json state %q (%s), want completed", rec.State, rec.Message)
	}
	assertWorkersGone(t, rec)

	lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
	if len(lines) < 2 {
		t.Fatalf("%d metrics lines, want at least 2", len(lines))
	}
	for i, m := range lines {
		if m.Time.IsZero() || len(m.Workers) != 5 {
			t.Errorf("line %d: time %v, %d workers", i+1, m.Time, len(m.Workers))
		}
		if i > 0 && (m.EnvSteps < lines[i-1].EnvSteps || m.ElapsedS <= lines[i-1].ElapsedS) {
			t.Errorf("line %d: env_steps %d elapsed %.2f after %d %.2f", i+1, m.EnvSteps, m.ElapsedS,
				lines[i-1].EnvSteps, lines[i-1].ElapsedS)
		}
	}
	if first, last := lines[0], lines[len(lines)-1]; last.EnvSteps < 20000 || last.EnvSteps <= first.EnvSteps || last.Episodes == 0 {
		t.Errorf("env steps %d -> %d, episodes %d: want growth to >= 20000", first.EnvSteps, last.EnvSteps, last.Episodes)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil {
		t.Error(err)
	}
	// The policy workers are hosted in their actors' processes (colocate):
	// their lines are in the actors' logs.
	for _, w := range []string{"actor-0", "actor-1", "sink-0"} {
		if _, err := os.Stat(filepath.Join(dir, "logs", w+".log")); err != nil {
			t.Error(err)
		}
	}

	out, code := runRlctl(t, nil, "plot", "cartpole-sink", "t1", "--workdir", work)
	if code != 0 {
		t.Fatalf("rlctl plot: exit %d: %s", code, out)
	}
	png := strings.TrimSpace(out)
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatalf("rlctl plot printed %q: %v", png, err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
		t.Errorf("%s: %d bytes, not a PNG", png, len(b))
	}

	out, code = runRlctl(t, noNameServer, "status", "cartpole-sink", "t1", "--workdir", work)
	if code != 0 || !strings.Contains(out, "completed") || !strings.Contains(out, "env steps") {
		t.Errorf("rlctl status after the run: exit %d:\n%s", code, out)
	}
}

// A policy worker killed mid-run is restarted under its name, with the
// actor whose process hosts it (cartpole-sink colocates them); the run goes
// on and ends cleanly when the controller is told to exit.
func TestStartRestartsKilledWorker(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-sink", "t2", "--workdir", work,
		"--set", "stop.env_steps=0", "--set", "metrics_interval=300ms")
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-sink", "t2")
	rec := readRecord(t, dir)
	old := rec.Workers["policy/0"]
	if old == 0 {
		t.Fatalf("no pid for policy/0 in %+v", rec)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m := waitOutput(t, p, regexp.MustCompile(`actor/0 restarted \(pid (\d+)\)`), 30*time.Second)
	if pid, _ := strconv.Atoi(m[1]); pid == old || !processAlive(pid) {
		t.Fatalf("restarted policy/0 has pid %s (old %d)", m[1], old)
	}
	restarted := len(readMetricsLines(t, filepath.Join(dir, "metrics.jsonl")))
	// Actors step again once the new policy worker answers.
	eventually.NoError(t, 30*time.Second, "env steps after the restart", func() error {
		lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
		if len(lines) < restarted+2 {
			return fmt.Errorf("%d lines", len(lines))
		}
		a, b := lines[len(lines)-2], lines[len(lines)-1]
		if b.EnvSteps <= a.EnvSteps || b.Restarts != 1 || b.Workers["policy/0"]["state"] != "RUNNING" {
			return fmt.Errorf("env steps %d -> %d, restarts %d, policy/0 %v", a.EnvSteps, b.EnvSteps, b.Restarts, b.Workers["policy/0"]["state"])
		}
		return nil
	})
	// The controller is the trial's member "ctl": exit completes the trial.
	rec = readRecord(t, dir)
	env := []string{"RLCTL_NAMERESOLVE=" + rec.NameResolve, "RLCTL_EXPERIMENT=cartpole-sink", "RLCTL_TRIAL=t2"}
	if out, code := runRlctl(t, env, "request", "ctl", "exit"); code != 0 {
		t.Fatalf("rlctl request ctl exit: %d %s", code, out)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	rec = readRecord(t, dir)
	if rec.State != "completed" || rec.Workers["policy/0"] == old {
		t.Errorf("record after the run: %+v", rec)
	}
	assertWorkersGone(t, rec)
	if processAlive(old) {
		t.Errorf("killed policy worker %d is alive", old)
	}
}

// SIGINT stops the trial: exit code 130, no worker process and no record
// left in the (external) name server.
func TestStartInterrupted(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	env := []string{"RLCTL_NAMERESOLVE=" + c.endpoint}
	p := start(t, "rlctl-start", env, "start", "cartpole-sink", "t3", "--workdir", work)
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	if !strings.Contains(readFile(t, p.log), "name resolve: etcd at "+c.endpoint) {
		t.Errorf("the controller did not use the name server at %s:\n%s", c.endpoint, readFile(t, p.log))
	}

	// A second controller for the same trial finds its workers alive.
	out, code := runRlctl(t, env, "start", "cartpole-sink", "t3", "--workdir", t.TempDir())
	if code != 1 || !strings.Contains(out, "alive") || !strings.Contains(out, "policy/0") {
		t.Errorf("second start of a live trial: exit %d:\n%s", code, out)
	}
	repo, err := etcd.Open(ctxFor(t, 10*time.Second), etcd.Config{Endpoints: []string{c.endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	// ... and leaves the running trial's records alone: 5 workers and ctl.
	if live, err := repo.Find(ctxFor(t, 10*time.Second), "distrl/cartpole-sink/t3/worker/"); err != nil || len(live) != 6 {
		t.Errorf("address records after the refused start: %d, %v; want 6", len(live), err)
	}
	// rlctl status shows the live workers with their figures.
	if out, code := runRlctl(t, env, "status", "cartpole-sink", "t3", "--workdir", work); code != 0 ||
		!strings.Contains(out, "actor/1") || !strings.Contains(out, "env_steps=") || !strings.Contains(out, "RUNNING") {
		t.Errorf("rlctl status: exit %d:\n%s", code, out)
	}

	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != 130 {
		t.Fatalf("rlctl start exited with %d after SIGINT, want 130:\n%s", code, readFile(t, p.log))
	}
	rec := readRecord(t, filepath.Join(work, "cartpole-sink", "t3"))
	if rec.State != "interrupted" {
		t.Errorf("state %q, want interrupted", rec.State)
	}
	assertWorkersGone(t, rec)
	left, err := repo.Find(ctxFor(t, 10*time.Second), "distrl/cartpole-sink/t3/")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("%d records left under the trial, first %s", len(left), left[0].Key)
	}
}

// rlctl stop signals the trial's controller, which stops it as on Ctrl-C;
// the experiment comes from a file.
func TestStopCommand(t *testing.T) {
	work := t.TempDir()
	// From a file: the built-in's own YAML under another name.
	yaml, code := runRlctl(t, nil, "experiments", "cartpole-sink")
	if code != 0 || !strings.Contains(yaml, "name: cartpole-sink") {
		t.Fatalf("rlctl experiments cartpole-sink: exit %d:\n%s", code, yaml)
	}
	file := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(yaml, "name: cartpole-sink", "name: mine", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "rlctl-start", noNameServer, "start", file, "t4", "--workdir", work)
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	out, code := runRlctl(t, nil, "stop", file, "t4", "--workdir", work)
	if code != 0 || !strings.Contains(out, "SIGINT") || !strings.Contains(out, "interrupted") {
		t.Errorf("rlctl stop: exit %d:\n%s", code, out)
	}
	if code := p.wait(t, 10*time.Second); code != 130 {
		t.Errorf("rlctl start exited with %d after rlctl stop, want 130", code)
	}
	assertWorkersGone(t, readRecord(t, filepath.Join(work, "mine", "t4")))
}

// A bad configuration is exit code 2 and a message naming the field; no
// process starts. A worker's configuration is checked by its type before
// anything starts: one line naming the group's key and the worker.
func TestStartRejectsBadConfig(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: bad\nworkers:\n  bogus: {count: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		field   string
		oneLine bool
	}{
		{"typo in a worker config", []string{"cartpole-ppo", "x", "--set", "workers.actor.config.ring_sise=8"},
			`workers.actor.config (actor/0): actor config: unknown key "ring_sise" (known: `, true},
		{"unknown environment", []string{"cartpole-ppo", "x", "--set", "workers.policy.config.env=NoSuchEnv-v0"},
			`workers.policy.config (policy/0): policy: config for env: api: unknown environment "NoSuchEnv-v0"`, true},
		{"wrong type in a worker config", []string{"cartpole-sink", "x", "--set", "workers.actor.config.ring_size=x"},
			`workers.actor.config (actor/0): actor config: key "ring_size": want an integer, got "x"`, true},
		{"index-dependent config: the last worker", []string{"cartpole-apex", "x", "--set", "workers.actor.config.apex_actors=2"},
			`workers.actor.config (actor/3): actor config: apex_actors 2`, true},
		{"trainer hyperparameter", []string{"cartpole-ppo", "x", "--set", "workers.trainer.config.ppo.lr=-1"},
			`workers.trainer.config (trainer/0): trainer config: ppo: invalid config: LR`, true},
		{"a billion workers", []string{"cartpole-sink", "x", "--set", "workers.actor.count=1000000000"},
			"workers.actor.count: 1000000000: the trial would have", true},
		{"auto count on a group other than policy", []string{"cartpole-sink", "x", "--set", "workers.actor.count=auto"},
			"workers.actor.count", false},
		{"unknown worker type", []string{"cartpole-sink", "x", "--set", "workers.bogus.count=1"}, "workers.bogus", false},
		{"unknown type in a file", []string{bad, "x"}, "workers.bogus", false},
		{"negative count", []string{"cartpole-sink", "x", "--set", "workers.actor.count=-2"}, "workers.actor.count", false},
		{"bad duration", []string{"cartpole-sink", "x", "--set", "stop.wall_time=soon"}, "stop.wall_time", false},
		{"unknown field", []string{"cartpole-sink", "x", "--set", "stop.env_stepz=1"}, "stop.env_stepz", false},
		{"unknown experiment", []string{"no-such-experiment", "x"}, "no-such-experiment", false},
		{"a policy no trainer trains", []string{"spread-teams-ppo", "x", "--set", "workers.trainer-red.count=0"},
			`workers.actor.config.agents.0.policy: "red": want a policy a trainer group trains (blue)`, false},
		{"a policy no policy worker serves", []string{"spread-teams-ppo", "x", "--set", "workers.policy-blue.config.policy=green"},
			`workers.actor.config.agents.1.policy: "blue": want a policy a policy worker group serves (green, red)`, false},
		{"an agent no mapping takes", []string{"spread-teams-ppo", "x", "--set", "workers.actor.config.agents.1.match=agent_1"},
			"agent_2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			out, code := runRlctl(t, noNameServer, append([]string{"start"}, append(tt.args, "--workdir", work)...)...)
			if code != 2 || !strings.Contains(out, tt.field) {
				t.Errorf("exit %d, want 2 and a message naming %s:\n%s", code, tt.field, out)
			}
			if tt.oneLine && strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("want one line:\n%s", out)
			}
			if entries, _ := os.ReadDir(work); len(entries) > 0 {
				t.Errorf("a trial directory was made for a bad configuration: %v", entries)
			}
		})
	}
}

// BenchmarkStartupEcho measures, for N echo workers (a process each, or
// per_process to a host process), the time from `rlctl start` to every
// worker RUNNING, and the controller's CPU share while it monitors them
// for 10 s (one iteration: each takes ~15 s). 256 worker processes, each
// its own Go runtime, etcd client and ZeroMQ threads, are more than two
// cores start together (load averages past 200, the embedded etcd starved
// for tens of seconds): hundreds of workers on one machine are hosted.
func BenchmarkStartupEcho(b *testing.B) {
	for _, tt := range []struct{ n, perProcess int }{{64, 0}, {256, 16}, {1024, 256}, {4096, 256}} {
		name := fmt.Sprintf("workers=%d", tt.n)
		if tt.perProcess > 0 {
			name += fmt.Sprintf("/per_process=%d", tt.perProcess)
		}
		b.Run(name, func(b *testing.B) {
			const run = 10 * time.Second
			work := b.TempDir()
			begin := time.Now()
			p := start(b, "rlctl-start", noNameServer, "start", "echo-64", "bench", "--workdir", work,
				"--set", fmt.Sprintf("workers.echo.count=%d", tt.n), "--set", fmt.Sprintf("workers.echo.per_process=%d", tt.perProcess),
				"--set", "stop.wall_time="+run.String())
			m := waitOutput(b, p, regexp.MustCompile(`all \d+ workers running after (\S+)`), 2*time.Minute)
			seen := time.Since(begin)
			reported, err := time.ParseDuration(m[1])
			if err != nil {
				b.Fatal(err)
			}
			pid := p.cmd.Process.Pid
			cpu0, t0 := cpuTicks(b, pid), time.Now()
			time.Sleep(run - time.Second) // sample before the wall time ends it
			cpu1, t1 := cpuTicks(b, pid), time.Now()
			if code := p.wait(b, time.Minute); code != 0 {
				b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
			}
			const clkTck = 100 // USER_HZ on Linux
			share := float64(cpu1-cpu0) / clkTck / t1.Sub(t0).Seconds()
			b.ReportMetric(seen.Seconds(), "startup-s")
			b.ReportMetric(reported.Seconds(), "reported-startup-s")
			b.ReportMetric(100*share, "ctl-cpu-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// waitCheckpoint waits for the trainer's checkpoint of version v in the
// trial directory dir (a trainer with checkpoint_every 1), looked for every
// few milliseconds. Kills meant to land mid-run wait for it: cartpole-ppo
// learns fast enough to pass its target within its first metrics line (0.3
// s, version 27 and a return of 450 seen once), so waiting for a metrics
// line's version let the trial end before the kill.
func waitCheckpoint(t *testing.T, dir string, v int64) {
	t.Helper()
	eventually.NoError(t, 60*time.Second, fmt.Sprintf("the trainer's checkpoint of version %d", v), func() error {
		files, err := ckptfile.List(filepath.Join(dir, "checkpoints"), "ckpt-")
		if err != nil || len(files) == 0 || files[0].N < v {
			return fmt.Errorf("checkpoints %v (%v)", files, err)
		}
		return nil
	})
}

// cpuTicks is utime+stime of pid in clock ticks, from /proc/{pid}/stat.
func cpuTicks(b *testing.B, pid int) int64 {
	b.Helper()
	stat := readFile(b, fmt.Sprintf("/proc/%d/stat", pid))
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	// After the command name: state(0) ... utime is field 14 of stat, index 11 here.
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse %s", stat)
	}
	return ut + st
}

// cartpole-ppo, the README's main job: a policy worker and the trainer are
// killed mid-run; both are restarted (the trainer from its checkpoint, so
// versions go on rising) and the run still reaches its target return.
func TestStartCartPolePPOSurvivesKills(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-ppo", "t5", "--workdir", work,
		"--set", "metrics_interval=300ms", "--set", "stop.wall_time=4m",
		"--set", "workers.trainer.config.checkpoint_every=1",
		// A lower target than the built-in 475 keeps the run short under -race;
		// reaching it still takes learning (a random policy scores about 20).
		"--set", "stop.target_return=200")
	waitOutput(t, p, regexp.MustCompile(`all 4 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-ppo", "t5")
	metrics := filepath.Join(dir, "metrics.jsonl")
	waitCheckpoint(t, dir, 3)
	rec := readRecord(t, dir)
	for _, name := range []string{"policy/0", "trainer/0"} {
		if err := syscall.Kill(rec.Workers[name], syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s: %v", name, err)
		}
	}
	waitOutput(t, p, regexp.MustCompile(`policy/0 restarted`), 60*time.Second)
	waitOutput(t, p, regexp.MustCompile(`trainer/0 restarted`), 60*time.Second)
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "reached the target 200") {
		t.Fatalf("the run did not stop at its target return:\n%s", out)
	}
	lines := readMetricsLines(t, metrics)
	last := lines[len(lines)-1]
	if last.Restarts != 2 {
		t.Fatalf("last metrics: restarts %d, want 2", last.Restarts)
	}
	// The trainer resumed from its checkpoint: once versions are reported
	// again (0 means no trainer or policy worker answered that interval),
	// they never fall below the highest one before (with checkpoint_every 1
	// at most the update in flight at the kill is lost).
	var highest int64
	for _, l := range lines {
		if l.Version == 0 {
			continue
		}
		if l.Version < highest-1 {
			t.Fatalf("version fell from %d to %d: the trainer did not resume", highest, l.Version)
		}
		highest = max(highest, l.Version)
	}
	ckpts, err := filepath.Glob(filepath.Join(dir, "checkpoints", "ckpt-*.ckpt"))
	if err != nil || len(ckpts) == 0 {
		t.Fatalf("no checkpoints in the trial directory: %v", err)
	}
	out, code := runRlctl(t, nil, "plot", "cartpole-ppo", "t5", "--workdir", work)
	if code != 0 {
		t.Fatalf("rlctl plot: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(strings.TrimSpace(out)); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("rlctl plot wrote %q: not a PNG (%v)", strings.TrimSpace(out), err)
	}
	t.Logf("solved to %.1f with 2 restarts in %.1fs, version %d, %d env steps", last.MeanReturn, last.ElapsedS, last.Version, last.EnvSteps)
	assertWorkersGone(t, readRecord(t, dir))
}

// spread-ppo, the multi-agent experiment: three agents of each
// simple_spread share one policy, and the trainer learns from all their
// steps through the process pipeline.
func TestStartSpreadPPOTrains(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "spread-ppo", "t7", "--workdir", work,
		"--set", "stop.env_steps=15000", "--set", "stop.wall_time=3m", "--set", "metrics_interval=300ms")
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	dir := filepath.Join(work, "spread-ppo", "t7")
	lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
	if len(lines) == 0 {
		t.Fatal("no metrics lines")
	}
	last := lines[len(lines)-1]
	// Version 2 needs two updates of 1024 agent steps: at least 683 env
	// steps of three agents each reached the trainer whole.
	if last.Version < 2 || last.EnvSteps < 15000 || last.Episodes == 0 {
		t.Fatalf("last metrics: version %d, env steps %d, episodes %d", last.Version, last.EnvSteps, last.Episodes)
	}
	var trained float64
	for _, l := range lines {
		n, _ := l.Workers["trainer/0"]["samples_trained"].(float64) // JSON numbers
		trained = max(trained, n)
	}
	if trained < 2048 {
		t.Fatalf("trainer trained on %.0f agent steps, want at least 2048", trained)
	}
	assertWorkersGone(t, readRecord(t, dir))
}

// Past its restarts a failing worker ends the trial: exit code 1, with a
// message naming the worker and why, and no process left behind.
func TestStartFailsPastMaxRestarts(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-sink", "t6", "--workdir", work,
		"--set", "stop.env_steps=0", "--set", "stop.max_restarts=0", "--set", "metrics_interval=300ms")
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-sink", "t6")
	rec := readRecord(t, dir)
	if err := syscall.Kill(rec.Workers["actor/1"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 60*time.Second); code != 1 {
		t.Fatalf("rlctl start exited with %d, want 1:\n%s", code, readFile(t, p.log))
	}
	out := readFile(t, p.log)
	if !strings.Contains(out, "actor/1") || !strings.Contains(out, "failed after 0 restarts") {
		t.Fatalf("the output should name actor/1 and why the trial failed:\n%s", out)
	}
	rec = readRecord(t, dir)
	if rec.State != "failed" {
		t.Errorf("controller.json state %q, want failed", rec.State)
	}
	assertWorkersGone(t, rec)
}
