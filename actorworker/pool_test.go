package actorworker_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/worker/member"
)

// keepC4 keeps versions 1..n of policy c4, connect4's default inline
// network with parameters drawn from the version, tagged pool.
func keepC4(t *testing.T, c *cluster, n int) {
	t.Helper()
	_, params := workertest.NewPolicy(t, env.Connect4Name, nil).Params()
	vs, dir := paramstream.NewVersions(c.repo, testTrial), t.TempDir()
	for v := int64(1); v <= int64(n); v++ {
		for i := range params {
			params[i] = float32(v) * 0.01 * float32(i%7-3)
		}
		if _, err := vs.Keep(ctxT(t), "c4", v, 3, dir, params, "pool"); err != nil {
			t.Fatal(err)
		}
	}
}

// selfPlay is an actor of connect4: player_0 plays c4 inline and sends
// its steps to stream learner, player_1 a version of c4's pool of the
// last 3, drawn per episode, whose steps go to stream opponent. Batches
// span episodes, except the pool's (one version each).
func selfPlay(maxSteps int64) map[string]any {
	return map[string]any{"env": env.Connect4Name, "ring_size": 4, "sample_steps": 64, "span_episodes": true, "max_env_steps": maxSteps,
		"agents": []map[string]any{
			{"match": "player_0", "policy": "c4", "inference": "inline", "sample_stream": "learner"},
			{"match": "player_1", "policy": "c4-pool", "sample_stream": "opponent", "pool": map[string]any{"policy": "c4", "last": 3}},
		}}
}

// Over 1000 episodes player_1's versions follow the pool's distribution,
// uniform over the newest 3 tagged pool (chi-square with 2 degrees of
// freedom at p = 0.001: 13.82); every step of an episode is played by the
// version drawn for it; a restarted actor draws from the pool again.
func TestPoolDrawsPerEpisode(t *testing.T) {
	c := newCluster(t)
	keepC4(t, c, 5)
	opp := newConsumer(t, c.repo, "opponent")
	learner := newConsumer(t, c.repo, "learner")
	actor := c.start(t, actorworker.TypeName, 0)
	c.run(t, actor, selfPlay(60_000))
	c.waitState(t, actor, member.StateCompleted, opp, learner)
	pools := c.stats(t, actor)["policies"].(map[string]any)["c4-pool"].(map[string]any)
	by := pools["pool_draws_by_version"].(map[string]any)
	draws := statInt(t, pools, "pool_draws")
	if draws < 1000 {
		t.Fatalf("%d draws, want 1000 or more (stats %v)", draws, pools)
	}
	total, chi2 := 0.0, 0.0
	for _, v := range []string{"3", "4", "5"} {
		total += float64(statInt(t, by, v))
	}
	for _, v := range []string{"3", "4", "5"} {
		d := float64(statInt(t, by, v)) - total/3
		chi2 += d * d / (total / 3)
	}
	if len(by) != 3 || int64(total) != draws || chi2 > 13.82 {
		t.Errorf("draws %v (%d in all): chi-square %.2f over the pool 3, 4, 5 (bound 13.82)", by, draws, chi2)
	}
	// The opponent's batches: each step's version is a pool member, one
	// version per episode (a batch is cut at an episode's end, or holds
	// the rest of one), and the episodes' versions add up to the draws.
	waitFor(t, "the opponent's batches", func() bool { return len(opp.batches) > 0 }, opp)
	episodes := map[int64]int64{}
	for _, b := range opp.batches {
		v := b.PolicyVersion
		if v < 3 || v > 5 {
			t.Fatalf("a batch of player_1 played by version %d, not in the pool", v)
		}
		episodes[v] += int64(len(b.Episodes))
	}
	for v, n := range episodes {
		if d := statInt(t, by, strconv.FormatInt(v, 10)); n > d {
			t.Errorf("version %d played %d episodes, drawn %d times", v, n, d)
		}
	}

	// A new actor (a restarted one) draws from the pool from its first
	// episode.
	again := c.start(t, actorworker.TypeName, 1)
	c.run(t, again, selfPlay(2_000))
	c.waitState(t, again, member.StateCompleted, opp, learner)
	st := c.stats(t, again)["policies"].(map[string]any)["c4-pool"].(map[string]any)
	if n := statInt(t, st, "pool_draws"); n == 0 {
		t.Errorf("a restarted actor drew nothing: %v", st)
	}
}

// A pool with no version tagged is waited for, then refused with a line
// that says so; a pool on remote inference, or exploring, is refused.
func TestPoolConfigRefused(t *testing.T) {
	c := newCluster(t)
	keepC4(t, c, 1)
	actor := c.start(t, actorworker.TypeName, 0)
	cfg := selfPlay(100)
	cfg["agents"].([]map[string]any)[1]["pool"] = map[string]any{"policy": "c4", "tag": "best", "last": 3, "timeout_ms": 200}
	err := c.panel.Request(ctxT(t), actor, member.CmdConfigure, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), `no version tagged "best" after 200ms (timeout_ms): 1 versions of it kept`) {
		t.Fatalf("configure with an empty pool: %v", err)
	}
	for name, change := range map[string]map[string]any{
		"remote":  {"inference": "remote"},
		"epsilon": {"epsilon": 0.1},
		"no last": {"pool": map[string]any{"policy": "c4"}},
		"tag 12":  {"pool": map[string]any{"policy": "c4", "last": 2, "tag": "12"}},
	} {
		cfg := selfPlay(100)
		m := cfg["agents"].([]map[string]any)[1]
		for k, v := range change {
			m[k] = v
		}
		if err := actorworker.CheckConfig(workertest.Args(t, cfg), 0); err == nil {
			t.Errorf("%s: CheckConfig accepted %v", name, m)
		}
	}
	// A pool plays inline, so its versions may play greedily.
	greedy := selfPlay(100)
	greedy["agents"].([]map[string]any)[1]["deterministic"] = true
	if err := actorworker.CheckConfig(workertest.Args(t, greedy), 0); err != nil {
		t.Errorf("a deterministic pool: %v", err)
	}
}
