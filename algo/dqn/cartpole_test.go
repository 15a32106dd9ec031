package dqn_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/algo/dqn"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/replay"
	"github.com/vmihailenco/msgpack/v5"
)

// solveResult is how a single-process Ape-X-style run went.
type solveResult struct {
	steps, episodes, updates int
	wall                     time.Duration
	meanReturn               float64
	solved                   bool
}

// solveCartPole learns CartPole-v1 in one goroutine with every part of the
// distributed path but the sockets: an actor's localreplay memory
// (3-step returns, initial priorities), a prioritized replay.Table,
// the DQN learner sending |TD errors| back as priorities. It stops when
// the last 20 episodes average 475 or after maxSteps.
func solveCartPole(t testing.TB, seed uint64, maxSteps int) solveResult {
	cp, err := env.NewCartPole(500)
	if err != nil {
		t.Fatal(err)
	}
	spec := nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 2}
	cfg := dqn.DefaultConfig()
	cfg.LR = 1e-3
	cfg.Dueling = true
	l, err := dqn.NewLearner(spec, cfg, int64(seed))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := localreplay.New(localreplay.Config{FrameSize: 4, Gamma: 0.99, NStep: 3, MaxTransitions: 2000, MaxEpisodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := replay.NewTable(replay.Options{Name: "cartpole", MaxSize: 50000, Sampler: replay.Prioritized,
		Remover: replay.RemoveFIFO, Alpha: 0.6, Beta: 0.4, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	ws, out := nn.NewWorkspace(), &nn.Output{}
	var q []float32
	qOf := func(obs []float32) []float32 {
		q, err = dqn.QValues(l.Online(), cfg.Dueling, obs, 1, ws, out, q)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	const batch, warmup = 64, 1000
	var b dqn.Batch
	var td []float64
	var returns []float64
	res := solveResult{}
	start := time.Now()
	obs, _ := cp.Reset(int64(seed))
	ep, _ := mem.Open(obs[0])
	epRet := 0.0
	for res.steps < maxSteps {
		eps := max(0.02, 1-float64(res.steps)/10000)
		qs := qOf(obs[0])
		a := dqn.EpsilonGreedy(r, qs, eps)
		v := qs[dqn.Argmax(qs)]
		st, err := cp.Step([]api.Action{{Discrete: int32(a)}})
		if err != nil {
			t.Fatal(err)
		}
		res.steps++
		epRet += float64(st.Rewards[0])
		if err := mem.Step(ep, localreplay.Step{Action: int32(a), Reward: []float32{st.Rewards[0]}, Value: v, Estimate: qs[a], Frame: st.Obs[0]}); err != nil {
			t.Fatal(err)
		}
		obs = st.Obs
		if st.Terminated[0] || st.Truncated[0] {
			boot := qOf(obs[0])
			mem.Close(ep, st.Terminated[0], boot[dqn.Argmax(boot)])
			for _, it := range mem.TakeNew() {
				data, _ := msgpack.Marshal(&it.Transition)
				tb.TryInsert(float64(it.Priority), data)
			}
			returns = append(returns, epRet)
			res.episodes++
			if n := len(returns); n >= 20 {
				m := 0.0
				for _, x := range returns[n-20:] {
					m += x / 20
				}
				res.meanReturn = m
				if m >= 475 {
					res.solved = true
					break
				}
			}
			epRet = 0
			obs, _ = cp.Reset(int64(seed) + int64(res.episodes))
			ep, _ = mem.Open(obs[0])
		}
		if res.steps < warmup || tb.Counters().Size < batch {
			continue
		}
		s, err := tb.TrySample(batch)
		if err != nil {
			t.Fatal(err)
		}
		b = dqn.Batch{Obs: b.Obs[:0], NextObs: b.NextObs[:0], Actions: b.Actions[:0], Rewards: b.Rewards[:0], Discounts: b.Discounts[:0], Weights: b.Weights[:0]}
		ids := make([]uint64, len(s))
		for i, it := range s {
			var tr localreplay.Transition
			if err := msgpack.Unmarshal(it.Data, &tr); err != nil {
				t.Fatal(err)
			}
			b.Obs, b.NextObs = append(b.Obs, tr.Obs.Data...), append(b.NextObs, tr.NextObs.Data...)
			b.Actions, b.Rewards = append(b.Actions, tr.Action), append(b.Rewards, tr.Reward)
			b.Discounts, b.Weights = append(b.Discounts, tr.Discount), append(b.Weights, float32(it.Weight))
			ids[i] = it.ID
		}
		_, td, err = l.Update(&b, td)
		if err != nil {
			t.Fatal(err)
		}
		res.updates++
		for i := range td {
			td[i] += 1e-6
		}
		if _, err := tb.UpdatePriorities(ids, td); err != nil {
			t.Fatal(err)
		}
	}
	res.wall = time.Since(start)
	return res
}

// DQN with prioritized replay and 3-step returns learns CartPole to a
// mean return of 475.
func TestDQNSolvesCartPole(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("learning run: not with -short or -race")
	}
	res := solveCartPole(t, 1, 150_000)
	t.Logf("%+v", res)
	if !res.solved {
		t.Fatalf("not solved in %d steps: mean return of the last 20 episodes %.1f", res.steps, res.meanReturn)
	}
}

// BenchmarkSolveCartPole: wall time and environment steps to a mean
// return of 475, one process (the figures e2e's cartpole-apex is held
// against).
func BenchmarkSolveCartPole(b *testing.B) {
	var wall, steps float64
	for i := range b.N {
		res := solveCartPole(b, uint64(i+1), 300_000)
		if !res.solved {
			b.Fatalf("seed %d not solved: %+v", i+1, res)
		}
		wall += res.wall.Seconds()
		steps += float64(res.steps)
	}
	b.ReportMetric(wall/float64(b.N), "s-to-475")
	b.ReportMetric(steps/float64(b.N), "steps-to-475")
}
