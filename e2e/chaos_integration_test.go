package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve/names"
)

// assertNoRecords checks that nothing is registered under the trial.
func (c *cluster) assertNoRecords(prefix string) {
	c.t.Helper()
	left, err := c.repo().Find(ctxFor(c.t, 10*time.Second), prefix)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range left {
		c.t.Errorf("record left: %s = %s", e.Key, e.Value)
	}
}

// A SIGKILLed controller of a local trial leaves nothing running: its own
// workers get SIGTERM from the kernel, and a worker that joined by hand
// (not its child) interrupts itself after --orphan-timeout. rlctl stop
// then clears the records the dead controller owned.
func TestControllerKilledLeavesNothing(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	exp, trial := "echo-64", c.trial.Trial
	env := append([]string{"RLCTL_NAMERESOLVE=" + c.endpoint}, "RLCTL_EXPERIMENT="+exp, "RLCTL_TRIAL="+trial)
	p := start(t, "rlctl-start", env, "start", exp, trial, "--workdir", work,
		"--set", "workers.echo.count=2", "--set", "stop.wall_time=5m", "--orphan-timeout", "1s")
	waitOutput(t, p, regexp.MustCompile(`all 2 workers running`), 30*time.Second)
	c.env = env
	extra := c.worker("echo", 2, "--orphan-timeout", "1s")
	repo := c.repo()
	eventually.NoError(t, 20*time.Second, "echo/2 registers", func() error {
		_, err := repo.Get(ctxFor(t, 5*time.Second), "distrl/"+exp+"/"+trial+"/worker/echo/2")
		return err
	})

	killed := time.Now()
	p.signal(t, syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	if code := extra.wait(t, 30*time.Second); code != 0 {
		t.Errorf("the orphaned echo/2 exited with %d", code)
	}
	t.Logf("orphaned worker exited %v after the controller's SIGKILL (orphan timeout 1s, ctl TTL)", time.Since(killed).Round(time.Millisecond))
	if log := readFile(t, extra.log); !strings.Contains(log, "controller is gone") {
		t.Errorf("echo/2's log does not say why it stopped:\n%s", log)
	}
	rec := readRecord(t, filepath.Join(work, exp, trial))
	eventually.NoError(t, 10*time.Second, "the controller's workers exit", func() error {
		for name, pid := range rec.Workers {
			if processAlive(pid) {
				return fmt.Errorf("%s (pid %d) runs", name, pid)
			}
		}
		return nil
	})

	out, code := runRlctl(t, env, "stop", exp, trial, "--workdir", work)
	if code != 0 || !strings.Contains(out, "cleared the records") {
		t.Fatalf("rlctl stop after the controller died: exit %d:\n%s", code, out)
	}
	c.assertNoRecords(names.NewTrial(exp, trial).Prefix())
}

// A stopped actor (SIGSTOP: its loop no longer turns) is detected as HUNG
// within the bound, killed and replaced, and the trial still completes,
// leaving no process and no record.
func TestHungActorReplaced(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	const bound = time.Second
	env := []string{"RLCTL_NAMERESOLVE=" + c.endpoint}
	// The address lease outlives the bound, so the stopped actor is HUNG
	// before it could be LOST. The trial ends on wall time, not env steps:
	// the replacement registers only once the stopped actor's lease has
	// expired, and the other actor reached any fixed step count first when
	// the pipeline was fast (the experiment's own limit of 1M steps too:
	// it is lifted).
	p := start(t, "rlctl-start", env, "start", "cartpole-sink", c.trial.Trial, "--workdir", work,
		"--hung-after", bound.String(), "--worker-ttl", "10s", "--set", "stop.wall_time=20s", "--set", "stop.env_steps=0")
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-sink", c.trial.Trial)
	eventually.NoError(t, 30*time.Second, "env steps", func() error {
		if lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl")); len(lines) == 0 || lines[len(lines)-1].EnvSteps == 0 {
			return fmt.Errorf("no env steps yet")
		}
		return nil
	})
	old := readRecord(t, dir).Workers["actor/0"]
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The process hosts policy/0 as well (colocate): the reason names the
	// worker found HUNG, either of the two that share its loop.
	waitOutput(t, p, regexp.MustCompile(`restarting actor/0 \(1 of \d+\): (actor|policy)/0 HUNG: RUNNING but the loop has not turned for`), 30*time.Second)
	detected := time.Since(stopped)
	waitOutput(t, p, regexp.MustCompile(`actor/0 restarted \(pid \d+\)`), time.Minute)
	t.Logf("SIGSTOP -> HUNG detected in %v (bound %v); -> replaced in %v", detected.Round(time.Millisecond), bound, time.Since(stopped).Round(time.Millisecond))
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d", code)
	}
	rec := readRecord(t, dir)
	if rec.State != "completed" || rec.Workers["actor/0"] == old {
		t.Errorf("record after the run: %+v", rec)
	}
	assertWorkersGone(t, rec)
	if processAlive(old) {
		t.Errorf("the hung actor (pid %d) is alive", old)
	}
	c.assertNoRecords(names.NewTrial("cartpole-sink", c.trial.Trial).Prefix())
}

// One cartpole-ppo trial hit by a fault at a time: SIGKILL of an actor, of
// the policy worker and of the trainer (which resumes from its checkpoint:
// the version keeps rising), then a name server restart on the same data
// directory. After each the run is healthy again (the worker restarted,
// env steps and, after the trainer, the version rising) before the next,
// the trial completes (told exit), and nothing is left running or registered.
// The time from each fault to health is logged.
func TestChaosPPO(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	exp, trial := "cartpole-ppo", c.trial.Trial
	env := []string{"RLCTL_NAMERESOLVE=" + c.endpoint}
	p := start(t, "rlctl-start", env, "start", exp, trial, "--workdir", work,
		"--set", "metrics_interval=300ms", "--set", "stop.wall_time=6m",
		"--set", "workers.trainer.config.checkpoint_every=1", "--set", "stop.max_restarts=5",
		// Never reached: the faults land mid-run; ctl exit completes it.
		"--set", "stop.target_return=100000")
	waitOutput(t, p, regexp.MustCompile(`all 4 workers running`), 30*time.Second)
	dir := filepath.Join(work, exp, trial)
	last := func() metricsLine {
		lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
		if len(lines) == 0 {
			return metricsLine{}
		}
		return lines[len(lines)-1]
	}
	// healthy waits until every worker is RUNNING after restarts restarts
	// and env steps and the version rose past before.
	healthy := func(what string, since time.Time, restarts int, before metricsLine) {
		t.Helper()
		eventually.NoError(t, 2*time.Minute, what+": healthy again", func() error {
			m := last()
			for name, w := range m.Workers {
				if w["state"] != "RUNNING" {
					return fmt.Errorf("%s is %v", name, w["state"])
				}
			}
			if m.Restarts != restarts || len(m.Workers) != 4 || m.EnvSteps <= before.EnvSteps || m.Version <= before.Version {
				return fmt.Errorf("restarts %d, %d workers, env steps %d (before %d), version %d (before %d)",
					m.Restarts, len(m.Workers), m.EnvSteps, before.EnvSteps, m.Version, before.Version)
			}
			return nil
		})
		t.Logf("%-28s fault -> healthy in %v", what, time.Since(since).Round(10*time.Millisecond))
	}
	eventually.NoError(t, time.Minute, "version 3", func() error {
		if v := last().Version; v < 3 {
			return fmt.Errorf("version %d", v)
		}
		return nil
	})
	for i, name := range []string{"actor/1", "policy/0", "trainer/0"} {
		before := last()
		if err := syscall.Kill(readRecord(t, dir).Workers[name], syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s: %v", name, err)
		}
		healthy("SIGKILL "+name, time.Now(), i+1, before)
	}
	if log := readFile(t, filepath.Join(dir, "logs", "trainer-0.log")); !strings.Contains(log, "resumed") {
		t.Errorf("the restarted trainer did not resume from its checkpoint:\n%s", log)
	}

	before := last()
	killed := time.Now()
	c.ns.signal(t, syscall.SIGKILL)
	c.ns.wait(t, 10*time.Second)
	c.startNameServer(c.endpoint)
	healthy("name server SIGKILL+restart", killed, 3, before)

	ctlEnv := append(env, "RLCTL_EXPERIMENT="+exp, "RLCTL_TRIAL="+trial)
	if out, code := runRlctl(t, ctlEnv, "request", "ctl", "exit"); code != 0 {
		t.Fatalf("rlctl request ctl exit: %d %s", code, out)
	}
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d", code)
	}
	rec := readRecord(t, dir)
	if rec.State != "completed" {
		t.Errorf("trial %s: %s", rec.State, rec.Message)
	}
	assertWorkersGone(t, rec)
	c.assertNoRecords(names.NewTrial(exp, trial).Prefix())
}
