package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// trainerStats are the trainer figures the learning tests read.
type trainerStats struct {
	State        string   `msgpack:"state"`
	Version      int64    `msgpack:"version"`
	Updates      int64    `msgpack:"updates"`
	Trained      int64    `msgpack:"samples_trained"`
	TrainRate    float64  `msgpack:"train_samples_per_s"`
	Episodes     int64    `msgpack:"episodes"`
	MeanReturn   *float64 `msgpack:"mean_return"`
	DroppedStale int64    `msgpack:"dropped_stale"`
	Checkpoints  int64    `msgpack:"checkpoints"`
	CkptVersion  int64    `msgpack:"checkpoint_version"`
	ResumedFrom  int64    `msgpack:"resumed_from"`
	LagP50       *float64 `msgpack:"policy_lag_p50"`
	LagP99       *float64 `msgpack:"policy_lag_p99"`
	UptimeS      float64  `msgpack:"uptime_s"`
}

// solvedReturn is CartPole-v1's "solved" bar: a mean return of 475 over
// the last 20 episodes (the trainer's mean_return).
const solvedReturn = 475

// learningConfigs are the configure kwargs of a CartPole PPO run of one
// trainer, one policy worker and the given actors. The hyperparameters
// are those algo/ppo's learning test found fast (updates of 1024 steps,
// 4 epochs of 4 minibatches, learning rate 2.5e-3 annealed to 0 over 300
// updates). Each actor steps a ring of 2 CartPoles and cuts batches of up
// to 64 steps: in a sweep over rings of 2-16 and batches of 32-200 steps
// (three seeds each) this took the fewest environment steps and about the
// least time, because what actors make while the trainer updates waits in
// queues and goes stale, and less of it is made and dropped. extra is
// merged into the trainer's kwargs.
func learningConfigs(seed int64, actors []string, extra map[string]any) map[string]map[string]any {
	trainer := map[string]any{
		"env": "CartPole-v1", "seed": seed, "batch_steps": 1024,
		"ppo": map[string]any{"lr": 2.5e-3, "lr_decay_updates": 300, "minibatch_size": 256},
	}
	for k, v := range extra {
		trainer[k] = v
	}
	cfgs := map[string]map[string]any{
		"trainer/0": trainer,
		"policy/0":  {"env": "CartPole-v1", "seed": seed},
	}
	for i, a := range actors {
		cfgs[a] = map[string]any{"env": "CartPole-v1", "ring_size": 2, "sample_steps": 64, "seed": seed*100 + int64(i)}
	}
	return cfgs
}

// startInOrder configures and starts each worker before the next: the
// trainer publishes its parameters at configure but answers fetches only
// once running, and a policy worker fetches the newest parameters when it
// is configured.
func startInOrder(t testing.TB, panel *panel.ControlPanel, order []string, configs map[string]map[string]any) {
	t.Helper()
	for _, name := range order {
		configureAndStart(t, panel, []string{name}, configs)
	}
}

func trainerStatsOf(t testing.TB, panel *panel.ControlPanel) trainerStats {
	t.Helper()
	var s trainerStats
	request(t, panel, "trainer/0", "stats", nil, &s)
	if s.State != string(member.StateRunning) && s.State != string(member.StateCompleted) {
		st, _ := panel.WorkerStatus(ctxFor(t, 5*time.Second), "trainer/0")
		t.Fatalf("trainer %s: %s", s.State, st.Error)
	}
	return s
}

// envSteps sums the actors' env_steps.
func envSteps(t testing.TB, panel *panel.ControlPanel, actors []string) int64 {
	t.Helper()
	var n int64
	for _, a := range actors {
		var s actorStats
		request(t, panel, a, "stats", nil, &s)
		n += s.EnvSteps
	}
	return n
}

// learnResult is one run to the solved bar.
type learnResult struct {
	wall     time.Duration // from the first start to mean_return >= 475
	envSteps int64         // actors' env_steps at that moment
	final    trainerStats
}

// learnUntilSolved polls the trainer until its mean return reaches the
// solved bar, failing after limit.
func learnUntilSolved(t testing.TB, panel *panel.ControlPanel, actors []string, begin time.Time, limit time.Duration) learnResult {
	t.Helper()
	for {
		s := trainerStatsOf(t, panel)
		if s.MeanReturn != nil && *s.MeanReturn >= solvedReturn {
			return learnResult{wall: time.Since(begin), envSteps: envSteps(t, panel, actors), final: s}
		}
		if time.Since(begin) > limit {
			t.Fatalf("not solved within %v: trainer %+v (mean return %v)", limit, s, deref(s.MeanReturn))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// A trainer, a policy worker and two actors, each an `rlctl worker`
// process, learn CartPole-v1 to a mean return of 475: samples flow from
// the actors to the trainer, parameters from the trainer through the
// parameter service to the policy worker.
func TestLearnsCartPoleProcesses(t *testing.T) {
	c := newCluster(t)
	actors := []string{"actor/0", "actor/1"}
	order := append([]string{"trainer/0", "policy/0"}, actors...)
	c.worker("trainer", 0)
	c.worker("policy", 0)
	c.worker("actor", 0)
	c.worker("actor", 1)
	c.waitRegistered(order...)
	panel := c.panel()
	begin := time.Now()
	startInOrder(t, panel, order, learningConfigs(1, actors, nil))
	r := learnUntilSolved(t, panel, actors, begin, 240*time.Second)
	var p struct {
		Version int64 `msgpack:"version"`
	}
	request(t, panel, "policy/0", "stats", nil, &p)
	t.Logf("solved (mean return %.1f) in %.1fs wall, %d env steps; trainer: %d updates, %d steps trained (%.0f/s), %d stale batches dropped, lag p50 %v p99 %v; policy worker at version %d",
		*r.final.MeanReturn, r.wall.Seconds(), r.envSteps, r.final.Updates, r.final.Trained, r.final.TrainRate,
		r.final.DroppedStale, deref(r.final.LagP50), deref(r.final.LagP99), p.Version)
	if p.Version == 0 {
		t.Error("the policy worker never loaded a trained version")
	}
	for _, res := range panel.GroupRequest(ctxFor(t, 10*time.Second), order, "exit", nil) {
		if res.Err != nil {
			t.Errorf("exit %s: %v", res.Worker, res.Err)
		}
	}
}

// A trainer killed with SIGKILL and started again on the same
// checkpoint_dir resumes from its newest checkpoint: no version it
// published is lost (checkpoint_every 1), versions keep increasing, the
// files on disk are valid, and the actors and the policy worker carry on
// with it.
func TestTrainerResumesAfterKill(t *testing.T) {
	c := newCluster(t)
	const ttl = 2 * time.Second
	dir := filepath.Join(t.TempDir(), "checkpoints")
	actors := []string{"actor/0"}
	order := []string{"trainer/0", "policy/0", "actor/0"}
	trainer := c.worker("trainer", 0, "--ttl", ttl.String())
	c.worker("policy", 0)
	c.worker("actor", 0)
	c.waitRegistered(order...)
	panel := c.panel()
	cfgs := learningConfigs(2, actors, map[string]any{"checkpoint_dir": dir, "checkpoint_every": 1})
	// Small updates: versions come quickly, and training continues well
	// short of solving the task.
	cfgs["trainer/0"]["batch_steps"] = 256
	startInOrder(t, panel, order, cfgs)

	var before trainerStats
	eventually.NoError(t, 60*time.Second, "trainer version >= 5", func() error {
		if before = trainerStatsOf(t, panel); before.Version < 5 {
			return fmt.Errorf("version %d", before.Version)
		}
		return nil
	})
	trainer.signal(t, syscall.SIGKILL)
	trainer.wait(t, 5*time.Second)
	policyVersion := func() int64 {
		var p struct {
			Version int64 `msgpack:"version"`
		}
		request(t, panel, "policy/0", "stats", nil, &p)
		return p.Version
	}
	servedBefore := policyVersion()

	// Whatever the kill interrupted, the directory holds whole, valid
	// checkpoints, the newest at least the last version seen (a version is
	// checkpointed before it is published or reported). A trainer writes
	// the new one before it prunes the oldest, so a kill between the two
	// leaves one more than it keeps.
	files, err := filepath.Glob(filepath.Join(dir, "ckpt-*.ckpt"))
	if err != nil || len(files) == 0 || len(files) > trainerworker.KeepCheckpoints+1 {
		t.Fatalf("checkpoint files %v (%v), want 1 to %d", files, err, trainerworker.KeepCheckpoints+1)
	}
	for _, f := range files {
		if _, err := trainerworker.ReadCheckpoint(f); err != nil {
			t.Errorf("checkpoint on disk: %v", err)
		}
	}
	newest, _, err := trainerworker.LoadNewestCheckpoint(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if newest.Version < before.Version || newest.Version < servedBefore {
		t.Fatalf("newest checkpoint is version %d; the trainer had reported %d and the policy worker served %d",
			newest.Version, before.Version, servedBefore)
	}

	eventually.NoError(t, ttl+5*time.Second, "old trainer/0 LOST", func() error {
		st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), "trainer/0")
		if err != nil {
			return err
		}
		if st.State != member.StateLost {
			return fmt.Errorf("trainer/0 %s", st.State)
		}
		return nil
	})
	c.worker("trainer", 0, "--ttl", ttl.String())
	c.waitRegistered("trainer/0")
	startInOrder(t, panel, []string{"trainer/0"}, cfgs)
	resumed := trainerStatsOf(t, panel)
	if resumed.ResumedFrom != newest.Version || resumed.Version < newest.Version {
		t.Fatalf("restarted trainer resumed_from %d at version %d, want the newest checkpoint's %d",
			resumed.ResumedFrom, resumed.Version, newest.Version)
	}
	stepsAtRestart := envSteps(t, panel, actors)
	eventually.NoError(t, 60*time.Second, "training continues", func() error {
		s := trainerStatsOf(t, panel)
		pv := policyVersion()
		steps := envSteps(t, panel, actors)
		if s.Version < newest.Version+3 || pv < newest.Version+2 || steps <= stepsAtRestart {
			return fmt.Errorf("trainer version %d, policy worker at %d, env steps %d (at restart %d)", s.Version, pv, steps, stepsAtRestart)
		}
		return nil
	})
	after := trainerStatsOf(t, panel)
	t.Logf("killed at version %d (policy worker serving %d); newest checkpoint %d; resumed and reached version %d with checkpoint %d",
		before.Version, servedBefore, newest.Version, after.Version, after.CkptVersion)
	if _, err := os.Stat(filepath.Join(dir, trainerworker.CheckpointName(after.CkptVersion))); err != nil {
		t.Errorf("the resumed trainer's checkpoint: %v", err)
	}
}
