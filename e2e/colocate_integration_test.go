package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
)

// A policy worker hosted in its actor's process (rlctl worker --with)
// takes every request of that actor, though another policy worker of the
// trial runs on the same node in a process of its own; that one takes
// the requests of an actor without a colocated one. Killing the host
// process takes both of its workers, and the lone actor goes on.
func TestColocatedPolicyWorkerTakesItsActorsRequests(t *testing.T) {
	c := newCluster(t)
	c.worker("sink", 0)
	c.worker("policy", 0)
	host := c.worker("actor", 1, "--with", "policy")
	c.worker("actor", 0)
	all := []string{"sink/0", "policy/0", "policy/1", "actor/0", "actor/1"}
	c.waitRegistered(all...)
	panel := c.panel()
	policyCfg := map[string]any{"env": "CartPole-v1", "seed": 1}
	actorCfg := map[string]any{"env": "CartPole-v1", "ring_size": 4, "sample_steps": 50}
	configureAndStart(t, panel, all, map[string]map[string]any{
		"sink/0": {}, "policy/0": policyCfg, "policy/1": policyCfg, "actor/0": actorCfg, "actor/1": actorCfg,
	})

	type actorInference struct {
		EnvSteps int64 `msgpack:"env_steps"`
		Messages int64 `msgpack:"inference_messages"`
		Shm      int64 `msgpack:"inference_shm_messages"`
		Local    int64 `msgpack:"inference_local_messages"`
	}
	type policyRows struct {
		Rows int64 `msgpack:"rows"`
	}
	var a0, a1 actorInference
	eventually.NoError(t, 30*time.Second, "both actors step", func() error {
		request(t, panel, "actor/0", "stats", nil, &a0)
		request(t, panel, "actor/1", "stats", nil, &a1)
		if a0.EnvSteps < 2000 || a1.EnvSteps < 2000 {
			return fmt.Errorf("env_steps %d and %d, want 2000 each", a0.EnvSteps, a1.EnvSteps)
		}
		return nil
	})
	// Requests posted before policy/1 was found went elsewhere; from
	// then on every one stays in the process.
	before := a1
	eventually.NoError(t, 30*time.Second, "actor/1 steps on", func() error {
		request(t, panel, "actor/1", "stats", nil, &a1)
		if a1.Messages < before.Messages+500 {
			return fmt.Errorf("%d request messages, want %d", a1.Messages, before.Messages+500)
		}
		return nil
	})
	if sent, local := a1.Messages-before.Messages, a1.Local-before.Local; local != sent {
		t.Errorf("actor/1 sent %d request messages, %d of them to its own process's policy worker", sent, local)
	}
	request(t, panel, "actor/0", "stats", nil, &a0)
	if a0.Local != 0 || a0.Shm == 0 {
		t.Errorf("actor/0 (a process of its own): %d request messages, %d over shared memory, %d in its process", a0.Messages, a0.Shm, a0.Local)
	}
	var p0, p1 policyRows
	request(t, panel, "policy/0", "stats", nil, &p0)
	request(t, panel, "policy/1", "stats", nil, &p1)
	t.Logf("actor/0 %d steps, actor/1 %d; policy/0 %d rows, policy/1 %d", a0.EnvSteps, a1.EnvSteps, p0.Rows, p1.Rows)
	if p0.Rows == 0 || p1.Rows == 0 {
		t.Errorf("policy/0 answered %d rows, policy/1 %d: want both", p0.Rows, p1.Rows)
	}

	// The host process dies with both its workers; actor/0 goes on with
	// policy/0 (it may have sent some requests to policy/1, which time
	// out and are posted again).
	host.signal(t, syscall.SIGKILL)
	host.wait(t, 5*time.Second)
	request(t, panel, "actor/0", "stats", nil, &a0)
	after := a0.EnvSteps
	eventually.NoError(t, 30*time.Second, "actor/0 steps on", func() error {
		request(t, panel, "actor/0", "stats", nil, &a0)
		if a0.EnvSteps < after+2000 {
			return fmt.Errorf("env_steps %d, want %d", a0.EnvSteps, after+2000)
		}
		return nil
	})
}
