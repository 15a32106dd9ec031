package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/slurmtest"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
)

// slurmTrial is one trial on the shared 3-node SLURM cluster, with its own
// name server on the host side of the cluster's bridge.
type slurmTrial struct {
	*cluster
	sc   *slurmtest.Cluster
	work string // the workdir: on one machine the nodes share the filesystem
}

func newSlurmTrial(t testing.TB, experiment string) *slurmTrial {
	t.Helper()
	sc := slurmtest.Get(t)
	c := newClusterAt(t, net.JoinHostPort(sc.HostAddr, "0"))
	c.trial = names.NewTrial(experiment, c.trial.Trial)
	c.env = append(c.env, sc.Env()...)
	s := &slurmTrial{cluster: c, sc: sc, work: t.TempDir()}
	t.Cleanup(func() {
		// Whatever a failed test left in the queue goes, so the next test starts clean.
		_ = sc.Command("scancel", "--name="+strings.Join(s.jobNames(), ",")).Run()
	})
	return s
}

// start runs `rlctl start EXPERIMENT TRIAL --scheduler slurm` in the background.
func (s *slurmTrial) start(flags ...string) *proc {
	args := append([]string{"start", s.trial.Experiment, s.trial.Trial, "--scheduler", "slurm", "--workdir", s.work}, flags...)
	return start(s.t, "rlctl-start", s.env, args...)
}

func (s *slurmTrial) dir() string { return filepath.Join(s.work, s.trial.Experiment, s.trial.Trial) }

// jobNames are the trial's SLURM job names, one per worker type it may have.
func (s *slurmTrial) jobNames() []string {
	var out []string
	for _, typ := range []string{"trainer", "policy", "actor", "sink", "echo"} {
		out = append(out, "distrl."+s.trial.Experiment+"."+s.trial.Trial+"."+typ)
	}
	return out
}

// queue is what squeue shows of the trial's jobs (pending, running or
// completing), one "JOBID_INDEX STATE NODE" line each.
func (s *slurmTrial) queue() string {
	s.t.Helper()
	out, err := s.sc.Command("squeue", "-h", "-r", "--name="+strings.Join(s.jobNames(), ","), "-o", "%i %T %N").Output()
	if err != nil {
		s.t.Fatalf("squeue: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// records returns the trial's records in etcd, key -> value.
func (s *slurmTrial) records(prefix string) map[string]string {
	s.t.Helper()
	ctx := ctxFor(s.t, 10*time.Second)
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{s.endpoint}})
	if err != nil {
		s.t.Fatal(err)
	}
	defer repo.Close()
	entries, err := repo.Find(ctx, prefix)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[strings.TrimPrefix(e.Key, prefix)] = e.Value
	}
	return out
}

// assertClean checks that the trial left nothing in the queue or in etcd.
func (s *slurmTrial) assertClean() {
	s.t.Helper()
	if q := s.queue(); q != "" {
		s.t.Errorf("squeue still shows the trial's jobs:\n%s", q)
	}
	if left := s.records(s.trial.Prefix()); len(left) > 0 {
		s.t.Errorf("%d records left under %s: %v", len(left), s.trial.Prefix(), left)
	}
}

// nodesOf maps each registered worker to the cluster node its address is on.
func (s *slurmTrial) nodesOf(want int) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for name, addr := range s.records(s.trial.WorkerPrefix()) {
		if name == "ctl" {
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			s.t.Fatalf("%s: address %q: %v", name, addr, err)
		}
		n, ok := s.sc.NodeByAddr(host)
		if !ok {
			s.t.Errorf("%s advertises %s, not the address of a node (%v)", name, addr, s.sc.Nodes)
		}
		out[name] = n.Name
	}
	if len(out) != want {
		s.t.Fatalf("%d workers registered, want %d: %v", len(out), want, out)
	}
	return out
}

var workersRunning = regexp.MustCompile(`all \d+ workers running`)

// cartpole-ppo on a 3-node cluster reaches its target; its workers run on
// several nodes and advertise those nodes' addresses; nothing is left.
func TestSlurmCartPolePPO(t *testing.T) {
	s := newSlurmTrial(t, "cartpole-ppo")
	p := s.start()
	waitOutput(t, p, workersRunning, time.Minute)
	nodes := s.nodesOf(4)
	distinct := map[string]bool{}
	for _, n := range nodes {
		distinct[n] = true
	}
	if len(distinct) < 2 {
		t.Errorf("the workers ran on %d node(s), want >= 2: %v", len(distinct), nodes)
	}
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d", code)
	}
	out := readFile(t, p.log)
	if !strings.Contains(out, "reached the target 475") {
		t.Errorf("the trial did not reach its target:\n%s", out)
	}
	for _, f := range []string{"slurm/trainer.sbatch", "slurm/policy.sbatch", "slurm/actor.sbatch", "slurm/jobs.txt", "logs/actor-1.log"} {
		if _, err := os.Stat(filepath.Join(s.dir(), f)); err != nil {
			t.Errorf("trial directory: %v", err)
		}
	}
	s.assertClean()
}

// A cancelled actor task is resubmitted for its index and the run completes.
func TestSlurmRestartsCancelledTask(t *testing.T) {
	s := newSlurmTrial(t, "cartpole-sink")
	// Enough steps that the other actor does not finish the run before
	// the cancelled one is back (each runs 200k or more a second).
	p := s.start("--set", "stop.env_steps=10000000")
	waitOutput(t, p, workersRunning, time.Minute)
	out, err := s.sc.Command("squeue", "-h", "-r", "--name=distrl.cartpole-sink."+s.trial.Trial+".actor", "-o", "%i").Output()
	if err != nil || len(strings.Fields(string(out))) != 2 {
		t.Fatalf("actor tasks: %q, %v", out, err)
	}
	task := strings.Fields(string(out))[0]
	if b, err := s.sc.Command("scancel", task).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v\n%s", task, err, b)
	}
	waitOutput(t, p, regexp.MustCompile(`actor/\d restarted`), time.Minute)
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d", code)
	}
	if log := readFile(t, p.log); !strings.Contains(log, "env steps reached") || !strings.Contains(log, "1 restarts") {
		t.Errorf("want a completed run with 1 restart:\n%s", log)
	}
	if jobs := readFile(t, filepath.Join(s.dir(), "slurm", "jobs.txt")); !strings.Contains(jobs, " actor --array=") {
		t.Errorf("jobs.txt has no resubmitted index:\n%s", jobs)
	}
	s.assertClean()
}

// rlctl stop mid-run: rlctl start exits 130, nothing of the trial is left
// in the queue or in etcd.
func TestSlurmStop(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=3", "--set", "stop.wall_time=5m")
	waitOutput(t, p, workersRunning, time.Minute)
	status, code := runRlctl(t, s.env, "status", s.trial.Experiment, s.trial.Trial, "--workdir", s.work)
	onNode := slices.ContainsFunc(s.sc.Nodes, func(n slurmtest.Node) bool { return strings.Contains(status, n.Addr+":") })
	if code != 0 || !strings.Contains(status, "slurm: scripts in "+filepath.Join(s.dir(), "slurm")) || !onNode {
		t.Errorf("rlctl status: exit %d, want the scripts' directory and workers at node addresses:\n%s", code, status)
	}
	out, code := runRlctl(t, s.env, "stop", s.trial.Experiment, s.trial.Trial, "--workdir", s.work)
	if code != 0 {
		t.Errorf("rlctl stop: exit %d:\n%s", code, out)
	}
	if code := p.wait(t, time.Minute); code != 130 {
		t.Errorf("rlctl start exited with %d after rlctl stop, want 130", code)
	}
	s.assertClean()
}

// The generated script, submitted by hand for one more index, runs a worker
// that joins the running trial on a node; stopping the trial cancels it too.
func TestSlurmWorkerByHand(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=2", "--set", "stop.wall_time=5m")
	waitOutput(t, p, workersRunning, time.Minute)
	script := filepath.Join(s.dir(), "slurm", "echo.sbatch")
	if b, err := s.sc.Command("sbatch", "--array=2", script).CombinedOutput(); err != nil {
		t.Fatalf("sbatch --array=2 %s: %v\n%s", script, err, b)
	}
	panel := s.panel()
	eventually.NoError(t, time.Minute, "echo/2 registers", func() error {
		return panel.Connect(ctxFor(t, 5*time.Second), "echo/2")
	})
	var pong string
	if err := panel.Request(ctxFor(t, 10*time.Second), "echo/2", "ping", nil, &pong); err != nil || pong != "pong" {
		t.Errorf("echo/2 ping: %q, %v", pong, err)
	}
	s.nodesOf(3) // echo/2 advertises a node's address, like the others
	if out, code := runRlctl(t, s.env, "stop", s.trial.Experiment, s.trial.Trial, "--workdir", s.work); code != 0 {
		t.Errorf("rlctl stop: exit %d:\n%s", code, out)
	}
	p.wait(t, time.Minute)
	s.assertClean()
}

// Bad input is one clear line and exit 2, with nothing submitted and no
// record left; --dry-run prints the scripts and submits nothing.
func TestSlurmBadInput(t *testing.T) {
	s := newSlurmTrial(t, "cartpole-ppo")
	noSbatch := t.TempDir()
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"loopback name server", []string{"RLCTL_NAMERESOLVE=127.0.0.1:2379"}, nil, 2, "loopback"},
		{"no sbatch", []string{"PATH=" + noSbatch}, nil, 2, "no sbatch on PATH"},
		{"no such partition", nil, []string{"--partition", "nosuch"}, 2, `partition "nosuch" does not exist`},
		{"dry run", nil, []string{"--dry-run", "--partition", "debug", "--sbatch-arg=--qos=normal"}, 0, "#SBATCH --array=0-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := append([]string{"start", s.trial.Experiment, s.trial.Trial, "--scheduler", "slurm", "--workdir", s.work}, tt.args...)
			out, code := runRlctl(t, append(append([]string{}, s.env...), tt.env...), cmd...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tt.code, tt.want, out)
			}
			if tt.code == 2 && strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("want one line:\n%s", out)
			}
			if q := s.queue(); q != "" {
				t.Errorf("jobs submitted:\n%s", q)
			}
			if _, err := os.Stat(filepath.Join(s.dir(), "slurm", "jobs.txt")); err == nil {
				t.Error("a jobs.txt was written")
			}
			if left := s.records(s.trial.Prefix()); len(left) > 0 {
				t.Errorf("records left: %v", left)
			}
		})
	}
}

// With the controller killed, rlctl stop still ends the trial's jobs.
func TestSlurmStopAfterControllerKilled(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=2", "--set", "stop.wall_time=5m")
	waitOutput(t, p, workersRunning, time.Minute)
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	if q := s.queue(); strings.Count(q, "RUNNING") != 2 {
		t.Fatalf("want the 2 workers still running after the controller died:\n%s", q)
	}
	began := time.Now()
	out, code := runRlctl(t, s.env, "stop", s.trial.Experiment, s.trial.Trial, "--workdir", s.work)
	t.Logf("rlctl stop took %v", time.Since(began).Round(time.Millisecond))
	if code != 0 || !strings.Contains(out, "cancelled the slurm jobs") {
		t.Errorf("rlctl stop: exit %d:\n%s", code, out)
	}
	eventually.NoError(t, 30*time.Second, "the queue empties", func() error {
		if q := s.queue(); q != "" {
			return fmt.Errorf("squeue:\n%s", q)
		}
		return nil
	})
}

// With the controller killed and nobody running rlctl stop, the workers of
// a slurm trial interrupt themselves after --orphan-timeout and their
// tasks leave the queue.
func TestSlurmOrphanedWorkersExit(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=2", "--set", "stop.wall_time=5m", "--orphan-timeout", "1s")
	waitOutput(t, p, workersRunning, time.Minute)
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	eventually.NoError(t, time.Minute, "the orphaned workers' tasks end", func() error {
		if q := s.queue(); q != "" {
			return fmt.Errorf("squeue:\n%s", q)
		}
		return nil
	})
	for i := range 2 {
		if log := readFile(t, filepath.Join(s.dir(), "logs", fmt.Sprintf("echo-%d.log", i))); !strings.Contains(log, "controller is gone") {
			t.Errorf("echo/%d's log does not say why it stopped:\n%s", i, log)
		}
	}
}

// Tasks waiting in the queue do not count against the register timeout:
// held jobs outlast it, and the trial starts once they are released.
func TestSlurmQueuedTasksWait(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=2", "--set", "stop.wall_time=2s", "--register-timeout", "1s", "--sbatch-arg=--hold")
	waitOutput(t, p, regexp.MustCompile(`2 workers still queued, waiting for them: echo/0 \(slurm task \S+ PENDING: JobHeldUser\)`), time.Minute)
	out, err := s.sc.Command("squeue", "-h", "--name="+strings.Join(s.jobNames(), ","), "-o", "%A").Output()
	if err != nil || len(strings.Fields(string(out))) == 0 {
		t.Fatalf("held jobs: %q, %v", out, err)
	}
	if b, err := s.sc.Command("scontrol", append([]string{"release"}, strings.Fields(string(out))...)...).CombinedOutput(); err != nil {
		t.Fatalf("scontrol release: %v\n%s", err, b)
	}
	waitOutput(t, p, workersRunning, time.Minute)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Errorf("rlctl start exited with %d", code)
	}
	s.assertClean()
}

// per_process on SLURM: 5 echo workers, 2 per task, are an array of 3
// tasks hosting echo/0-1, echo/2-3 and echo/4-4, each logging to its
// logs/echo-FIRST-LAST.log; a cancelled task is resubmitted for its one
// array index and its two workers come back together.
func TestSlurmHostedWorkers(t *testing.T) {
	s := newSlurmTrial(t, "echo-64")
	p := s.start("--set", "workers.echo.count=5", "--set", "workers.echo.per_process=2", "--set", "stop.wall_time=20s")
	waitOutput(t, p, workersRunning, time.Minute)
	s.nodesOf(5)
	for _, log := range []string{"echo-0-1.log", "echo-2-3.log", "echo-4-4.log"} {
		if _, err := os.Stat(filepath.Join(s.dir(), "logs", log)); err != nil {
			t.Errorf("no host log %s: %v", log, err)
		}
	}
	out, err := s.sc.Command("squeue", "-h", "-r", "--name=distrl.echo-64."+s.trial.Trial+".echo", "-o", "%i").Output()
	tasks := strings.Fields(string(out))
	if err != nil || len(tasks) != 3 {
		t.Fatalf("echo tasks: %q, %v", out, err)
	}
	slices.Sort(tasks)
	if b, err := s.sc.Command("scancel", tasks[1]).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v\n%s", tasks[1], err, b)
	}
	waitOutput(t, p, regexp.MustCompile(`echo/2-3 restarted`), time.Minute)
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d", code)
	}
	// One restart for the task's two workers (a loaded machine may cost
	// another host its lease: that is not this test's business).
	if log := readFile(t, p.log); strings.Count(log, "restarting echo/2-3 ") != 1 {
		t.Errorf("want one restart of echo/2-3:\n%s", log)
	}
	if jobs := readFile(t, filepath.Join(s.dir(), "slurm", "jobs.txt")); !strings.Contains(jobs, " echo --array=1 ") {
		t.Errorf("jobs.txt has no resubmitted task 1:\n%s", jobs)
	}
	s.assertClean()
}

// cartpole-ppo with its two trainers as one data-parallel group on two
// nodes of the cluster (each trainer asks for more than half a node's
// CPUs, so SLURM cannot put both on one): the members find each other
// through etcd, all-reduce over tcp between the nodes' namespaces, and the
// trial reaches its target.
func TestSlurmTrainerGroup(t *testing.T) {
	s := newSlurmTrial(t, "cartpole-ppo")
	p := s.start("--set", "workers.trainer.count=2", "--set", "workers.trainer.resources.cpus=60")
	waitOutput(t, p, workersRunning, time.Minute)
	nodes := s.nodesOf(5)
	if nodes["trainer/0"] == nodes["trainer/1"] {
		t.Errorf("both trainers ran on %s, want two nodes: %v", nodes["trainer/0"], nodes)
	}
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "reached the target 475") {
		t.Errorf("the trial did not reach its target:\n%s", out)
	}
	for _, f := range []string{"trainer-0.log", "trainer-1.log"} {
		if log := readFile(t, filepath.Join(s.dir(), "logs", f)); !strings.Contains(log, "state synchronised from rank 0") {
			t.Errorf("%s: the group never formed:\n%s", f, tail(log, 30))
		}
	}
	t.Logf("trainers on %s and %s", nodes["trainer/0"], nodes["trainer/1"])
	s.assertClean()
}
