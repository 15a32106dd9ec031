package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// actorStats are the actor figures the data-plane tests read.
type actorStats struct {
	EnvSteps          int64  `msgpack:"env_steps"`
	AgentSteps        int64  `msgpack:"agent_steps"`
	Episodes          int64  `msgpack:"episodes"`
	BatchesSent       int64  `msgpack:"batches_sent"`
	InferenceFailures int64  `msgpack:"inference_failures"`
	State             string `msgpack:"state"`
}

// sinkSummary is the sink's account of what arrived.
type sinkSummary struct {
	Batches   int64            `msgpack:"batches"`
	Steps     int64            `msgpack:"steps"`
	Episodes  int64            `msgpack:"episodes"`
	Malformed int64            `msgpack:"malformed"`
	ByActor   map[string]int64 `msgpack:"by_actor"`
}

// request sends one command through the panel, failing the test on error.
func request(t testing.TB, panel *panel.ControlPanel, name, cmd string, kwargs, reply any) {
	t.Helper()
	if err := panel.Request(ctxFor(t, 10*time.Second), name, cmd, kwargs, reply); err != nil {
		t.Fatalf("%s %s: %v", name, cmd, err)
	}
}

// configureAndStart configures each worker with its kwargs, then starts them in the order given.
func configureAndStart(t testing.TB, panel *panel.ControlPanel, order []string, configs map[string]map[string]any) {
	t.Helper()
	for _, name := range order {
		request(t, panel, name, "configure", configs[name], nil)
	}
	for _, name := range order {
		request(t, panel, name, "start", nil, nil)
	}
}

// Two actors with a ring of four CartPoles each, one policy worker and one
// sample consumer, all processes: every batch arrives whole and the counts
// on both ends agree.
func TestDataPlaneProcesses(t *testing.T) {
	c := newCluster(t)
	workers := []string{"sink/0", "policy/0", "actor/0", "actor/1"}
	c.worker("sink", 0)
	c.worker("policy", 0)
	c.worker("actor", 0)
	c.worker("actor", 1)
	c.waitRegistered(workers...)
	panel := c.panel()
	const maxSteps = 3000
	actorCfg := func(seed int) map[string]any {
		return map[string]any{"env": "CartPole-v1", "ring_size": 4, "sample_steps": 50, "max_env_steps": maxSteps, "seed": seed}
	}
	configureAndStart(t, panel, workers, map[string]map[string]any{
		"sink/0":   {},
		"policy/0": {"env": "CartPole-v1", "seed": 1},
		"actor/0":  actorCfg(10),
		"actor/1":  actorCfg(20),
	})
	for _, a := range []string{"actor/0", "actor/1"} {
		eventually.NoError(t, 90*time.Second, a+" COMPLETED", func() error {
			st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), a)
			if err != nil {
				return err
			}
			if st.State != member.StateCompleted {
				return fmt.Errorf("state %s %s", st.State, st.Error)
			}
			return nil
		})
	}
	var total actorStats
	perActor := map[string]actorStats{}
	for _, a := range []string{"actor/0", "actor/1"} {
		var s actorStats
		request(t, panel, a, "stats", nil, &s)
		if s.EnvSteps < maxSteps || s.Episodes == 0 || s.BatchesSent == 0 {
			t.Fatalf("%s stats %+v", a, s)
		}
		perActor[a] = s
		total.AgentSteps += s.AgentSteps
		total.Episodes += s.Episodes
		total.BatchesSent += s.BatchesSent
	}
	var sum sinkSummary
	eventually.NoError(t, 20*time.Second, "every batch at the sink", func() error {
		sum = sinkSummary{}
		request(t, panel, "sink/0", "summary", nil, &sum)
		if sum.Batches != total.BatchesSent {
			return fmt.Errorf("sink has %d batches, actors sent %d", sum.Batches, total.BatchesSent)
		}
		return nil
	})
	if sum.Steps != total.AgentSteps || sum.Episodes != total.Episodes || sum.Malformed != 0 {
		t.Fatalf("sink %+v, actors sent steps %d episodes %d", sum, total.AgentSteps, total.Episodes)
	}
	for a, s := range perActor {
		if sum.ByActor[a] != s.BatchesSent {
			t.Fatalf("sink has %d batches from %s, it sent %d (by actor: %v)", sum.ByActor[a], a, s.BatchesSent, sum.ByActor)
		}
	}
	t.Logf("actors: %+v; sink: %+v", perActor, sum)
	for _, r := range panel.GroupRequest(ctxFor(t, 10*time.Second), workers, "exit", nil) {
		if r.Err != nil {
			t.Fatalf("exit: %v", r.Err)
		}
	}
}

// A policy worker killed mid-run: the actor says so in its status instead of
// hanging, keeps running, and recovers when a policy worker comes back.
func TestActorSurvivesPolicyWorkerLoss(t *testing.T) {
	c := newCluster(t)
	const ttl = 2 * time.Second
	c.worker("sink", 0)
	policy := c.worker("policy", 0, "--ttl", ttl.String())
	c.worker("actor", 0)
	c.waitRegistered("sink/0", "policy/0", "actor/0")
	panel := c.panel()
	policyCfg := map[string]any{"env": "CartPole-v1", "seed": 1}
	configureAndStart(t, panel, []string{"sink/0", "policy/0", "actor/0"}, map[string]map[string]any{
		"sink/0":   {},
		"policy/0": policyCfg,
		"actor/0":  {"env": "CartPole-v1", "ring_size": 2, "sample_steps": 50, "inference_timeout_ms": 500},
	})
	stepsAfter := func(min int64) func() error {
		return func() error {
			var s actorStats
			request(t, panel, "actor/0", "stats", nil, &s)
			if s.EnvSteps <= min {
				return fmt.Errorf("env_steps %d, want > %d", s.EnvSteps, min)
			}
			return nil
		}
	}
	eventually.NoError(t, 30*time.Second, "actor stepping", stepsAfter(200))

	policy.signal(t, syscall.SIGKILL)
	policy.wait(t, 5*time.Second)
	eventually.NoError(t, 20*time.Second, "actor reports the lost policy worker", func() error {
		st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), "actor/0")
		if err != nil {
			return err
		}
		if st.State != member.StateRunning || st.Warning == "" {
			return fmt.Errorf("actor status %+v", st)
		}
		return nil
	})
	st, _ := panel.WorkerStatus(ctxFor(t, 5*time.Second), "actor/0")
	t.Logf("actor while the policy worker is gone: %s, warning %q", st.State, st.Warning)
	var stalled actorStats
	request(t, panel, "actor/0", "stats", nil, &stalled)

	// A new policy worker takes the name once the old lease has gone.
	eventually.NoError(t, ttl+5*time.Second, "old policy/0 LOST", func() error {
		st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), "policy/0")
		if err != nil {
			return err
		}
		if st.State != member.StateLost {
			return fmt.Errorf("policy/0 %s", st.State)
		}
		return nil
	})
	c.worker("policy", 0, "--ttl", ttl.String())
	c.waitRegistered("policy/0")
	configureAndStart(t, panel, []string{"policy/0"}, map[string]map[string]any{"policy/0": policyCfg})
	eventually.NoError(t, 30*time.Second, "actor steps again", stepsAfter(stalled.EnvSteps+200))
	eventually.NoError(t, 20*time.Second, "actor warning clears", func() error {
		st, err := panel.WorkerStatus(ctxFor(t, 5*time.Second), "actor/0")
		if err != nil {
			return err
		}
		if st.State != member.StateRunning || st.Warning != "" {
			return fmt.Errorf("actor status %+v", st)
		}
		return nil
	})
}
