package trainerworker_test

import (
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// startDQN runs a replay worker whose table holds 200 random
// CartPole-shaped transitions, inserted as an actor would, and a DQN
// trainer configured with cfg (algorithm dqn added) that samples it.
func startDQN(t *testing.T, c *cluster, cfg map[string]any) (replay, trainer *workertest.Running) {
	t.Helper()
	rp, trs := startDQNs(t, c, 1, cfg)
	return rp, trs[0]
}

// startDQNs is startDQN with n trainers, configured (all of them) before
// any starts.
func startDQNs(t *testing.T, c *cluster, n int, cfg map[string]any) (replay *workertest.Running, trainers []*workertest.Running) {
	t.Helper()
	rp := c.start(t, replayworker.TypeName, 0)
	c.run(t, rp.Name(), map[string]any{"tables": []map[string]any{{"name": "default", "alpha": 0.6, "beta": 0.4,
		"limiter": map[string]any{"min_size": 64}}}})
	cfg = maps.Clone(cfg)
	cfg["algorithm"] = "dqn"
	for i := range n {
		tr := c.start(t, trainerworker.TypeName, i)
		c.request(t, tr.Name(), member.CmdConfigure, cfg, nil)
		trainers = append(trainers, tr)
	}
	for _, tr := range trainers {
		c.request(t, tr.Name(), member.CmdStart, nil, nil)
	}

	cl := c.replayClient(t)
	r := rand.New(rand.NewPCG(1, 2))
	vec := func() api.Tensor[float32] {
		v := make([]float32, 4)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 0.1)
		}
		return api.Tensor[float32]{Shape: []int{4}, Data: v}
	}
	insertTransitions(t, cl, 200, func() localreplay.Transition {
		return localreplay.Transition{Obs: api.NewFrames(vec()), NextObs: api.NewFrames(vec()), Action: int32(r.IntN(2)), Reward: 1, Discount: 0.97}
	})
	return rp, trainers
}

// insertTransitions inserts n transitions made by next into the replay's
// table "default" through cl, each of priority 1, in one request (retried
// until the replay worker takes it).
func insertTransitions(tb testing.TB, cl *replaystream.Client, n int, next func() localreplay.Transition) {
	tb.Helper()
	req := &replaystream.Request{Op: replaystream.OpInsert, Table: "default", TimeoutMs: 5000}
	prios := make([]float64, n)
	for i := range n {
		tr := next()
		data, err := msgpack.Marshal(&tr)
		if err != nil {
			tb.Fatal(err)
		}
		req.Items, prios[i] = append(req.Items, data), 1
	}
	req.Priorities = api.Tensor[float64]{Shape: []int{n}, Data: prios}
	eventually.NoError(tb, 10*time.Second, "insert", func() error { _, err := cl.Send(0, req); return err })
}

// A DQN trainer samples a replay worker, updates, sends priorities back to
// it, publishes versions and plays evaluation episodes.
func TestDQNTrainerLearnsFromReplay(t *testing.T) {
	c := newCluster(t)
	rp, tr := startDQN(t, c, map[string]any{"batch_size": 32, "publish_every": 5, "eval_every": 10,
		"dqn": map[string]any{"dueling": true, "target_update_every": 20}})

	sub := newSubscriber(t, c.repo)
	fetchVersion(t, sub, 20)
	var st struct {
		Algorithm      string   `msgpack:"algorithm"`
		Episodes       int64    `msgpack:"episodes"`
		PrioritiesSent int64    `msgpack:"priorities_sent"`
		MeanReturn     *float64 `msgpack:"mean_return"`
	}
	eventually.True(t, 20*time.Second, "priorities back at the replay, evaluation episodes", func() bool {
		var rs struct {
			PriorityUpdates int64 `msgpack:"priority_updates"`
		}
		c.request(t, rp.Name(), "stats", nil, &rs)
		c.request(t, tr.Name(), "stats", nil, &st)
		return rs.PriorityUpdates > 0 && st.Episodes > 0
	})
	if st.Algorithm != "dqn" || st.PrioritiesSent == 0 || st.MeanReturn == nil {
		t.Fatalf("trainer stats %+v", st)
	}
}

// A DQN trainer plays its evaluation episodes off its loop: with an
// episode due after every update and each one 2500 greedy steps of
// Freeway, updates go on while one plays (the ones due meanwhile are
// skipped and counted), and the episodes' returns are recorded when they
// end. Closing the trainer mid-episode waits for it (-race watches the
// environment).
func TestDQNTrainerEvaluatesOffTheLoop(t *testing.T) {
	c := newCluster(t)
	rp := c.start(t, replayworker.TypeName, 0)
	c.run(t, rp.Name(), map[string]any{"tables": []map[string]any{{"name": "default", "limiter": map[string]any{"min_size": 64}}}})
	cl := c.replayClient(t)
	r := rand.New(rand.NewPCG(3, 4))
	frame := func() api.Frames {
		f := api.NewFrames(api.NewTensor[float32](10, 10, 7))
		for i := range f.Data {
			f.Data[i] = float32(r.IntN(2))
		}
		return f
	}
	insertTransitions(t, cl, 200, func() localreplay.Transition {
		return localreplay.Transition{Obs: frame(), NextObs: frame(), Action: int32(r.IntN(3)), Reward: 1, Discount: 0.97}
	})
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"algorithm": "dqn", "env": "minatar-freeway", "hidden": []int{8}, "batch_size": 32,
		"eval_every": 1, "publish_every": 1000})
	var st struct {
		Updates      int64 `msgpack:"updates"`
		Episodes     int64 `msgpack:"episodes"`
		EvalsSkipped int64 `msgpack:"evals_skipped"`
	}
	eventually.True(t, 60*time.Second, "episodes recorded and updates made while they played", func() bool {
		c.request(t, tr.Name(), "stats", nil, &st)
		return st.Episodes >= 2 && st.EvalsSkipped > 0
	})
	if st.Episodes+st.EvalsSkipped > st.Updates {
		t.Errorf("%d episodes and %d skipped for %d updates", st.Episodes, st.EvalsSkipped, st.Updates)
	}
	t.Logf("%d updates, %d episodes played, %d skipped", st.Updates, st.Episodes, st.EvalsSkipped)
}
