package actorworker_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/stream"
)

// checkRig checks every agent's batches of every target of a drained rig.
func checkRig(t *testing.T, r *rig, cfg rigConfig) (kinds map[string]int) {
	t.Helper()
	kinds = map[string]int{}
	var sum actorworker.TargetStats
	for _, tg := range r.ring.Targets() {
		sum.Add(tg.Stats())
	}
	// The ring keeps the sum as the targets count, not by visiting them.
	if got := r.ring.Stats(); got != sum {
		t.Errorf("ring's running total %+v, the targets' counters sum to %+v", got, sum)
	}
	for i, tg := range r.ring.Targets() {
		st := tg.Stats()
		if int64(r.envs[i].ends) != st.Episodes {
			t.Errorf("target %d: env ended %d episodes, target counted %d", i, r.envs[i].ends, st.Episodes)
		}
		if n := int64(len(tg.Agents())); st.AgentSteps != n*st.EnvSteps {
			t.Errorf("target %d: %d agent steps for %d env steps of %d agents", i, st.AgentSteps, st.EnvSteps, n)
		}
		if got := int64(len(r.outs[i].batches)); got != st.BatchesSent {
			t.Errorf("target %d: producer accepted %d batches, target counted %d", i, got, st.BatchesSent)
		}
		byAgent := r.outs[i].byAgent()
		for j, a := range tg.Agents() {
			if a.Unsent() != 0 || a.Waiting() {
				t.Errorf("target %d agent %s: %d unsent batches, waiting=%v after drain", i, a.ID(), a.Unsent(), a.Waiting())
			}
			final := make([][]float32, len(r.envs[i].finalObs))
			for e, obs := range r.envs[i].finalObs {
				final[e] = obs[j]
			}
			batches := byAgent[a.ID()]
			rules := r.rules(cfg)
			checkBatches(t, batches, final, rules, st.EnvSteps, st.Episodes)
			for k, b := range batches {
				last := b.Len() - 1
				if terminatesInside(b) {
					kinds["terminated inside"]++
				}
				// Short of full, before the agent's last batch (which Drain
				// cuts), with the episode going on: a newer version cut it.
				if going := b.Terminated.Data[last] == 0 || rules.span; going && b.Truncated.Data[last] == 0 &&
					b.Len() < rules.sampleSteps && k+1 < len(batches) {
					kinds["version cut"]++
				}
				switch {
				case b.Terminated.Data[last] == 1:
					kinds["terminated"]++
				case b.Truncated.Data[last] == 1:
					kinds["truncated"]++
				default:
					kinds["cut"]++
				}
				if b.ActorID != "actor/0" || b.Policy != "p" || b.AgentID != a.ID() {
					t.Fatalf("batch labelled actor=%q policy=%q agent=%q", b.ActorID, b.Policy, b.AgentID)
				}
			}
		}
	}
	return kinds
}

// rules are the rules the rig's batches follow.
func (r *rig) rules(cfg rigConfig) batchRules {
	rules := batchRules{actions: cfg.actions, sampleSteps: cfg.sampleSteps, span: cfg.span, versionCuts: cfg.versionCuts}
	if rules.sampleSteps == 0 {
		rules.sampleSteps = actorworker.DefaultSampleSteps
	}
	if r.versioned != nil {
		rules.versionOf = r.versioned.versionOf
	}
	return rules
}

func TestTargetBatches(t *testing.T) {
	cases := []struct {
		name     string
		cfg      rigConfig
		envSteps int64
		obsShape []int    // one observation's shape in the batches; nil: [obs_dim]
		want     []string // kinds of batch ends (and "terminated inside") that must occur
	}{
		{
			name: "cartpole short limit",
			cfg: rigConfig{env: env.CartPoleName, envConfig: map[string]any{"max_episode_steps": 12},
				ringSize: 2, sampleSteps: 5, actions: 2},
			envSteps: 600, want: []string{"terminated", "truncated", "cut"},
		},
		{
			name: "cartpole spanning episodes",
			cfg: rigConfig{env: env.CartPoleName, envConfig: map[string]any{"max_episode_steps": 40},
				ringSize: 2, sampleSteps: 30, span: true, actions: 2},
			envSteps: 900, want: []string{"terminated", "terminated inside", "truncated", "cut"},
		},
		{
			name:     "cartpole spanning, default batch length",
			cfg:      rigConfig{env: env.CartPoleName, ringSize: 1, span: true, actions: 2},
			envSteps: 300, want: []string{"terminated inside", "cut"},
		},
		{
			name:     "cartpole default batch length",
			cfg:      rigConfig{env: env.CartPoleName, ringSize: 1, actions: 2},
			envSteps: 300, want: []string{"terminated"},
		},
		{
			name: "cartpole one step per batch",
			cfg: rigConfig{env: env.CartPoleName, envConfig: map[string]any{"max_episode_steps": 15},
				ringSize: 3, sampleSteps: 1, actions: 2},
			envSteps: 300, want: []string{"terminated", "truncated", "cut"},
		},
		{
			// An image observation keeps its [H, W, C] in the batches. A
			// random Breakout episode lasts 11 steps on average (the ball
			// first comes down at step 6), so a limit of 10 truncates many.
			name: "minatar breakout",
			cfg: rigConfig{env: "minatar-breakout", envConfig: map[string]any{"max_episode_steps": 10},
				ringSize: 2, sampleSteps: 8, actions: 6},
			envSteps: 300, obsShape: []int{10, 10, 4}, want: []string{"truncated", "cut"},
		},
		{
			name: "simple_spread",
			cfg: rigConfig{env: env.SimpleSpreadName, envConfig: map[string]any{"n_agents": 3, "max_cycles": 25},
				ringSize: 2, sampleSteps: 10, actions: 5},
			envSteps: 300, want: []string{"truncated", "cut"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.cfg)
			r.run(t, c.envSteps)
			kinds := checkRig(t, r, c.cfg)
			for _, out := range r.outs {
				for _, b := range out.batches {
					if c.obsShape != nil && !slices.Equal(b.Obs.Shape[1:], c.obsShape) || c.obsShape == nil && len(b.Obs.Shape) != 2 {
						t.Fatalf("batch observations of shape %v, want [T %v]", b.Obs.Shape, c.obsShape)
					}
				}
			}
			for _, k := range c.want {
				if kinds[k] == 0 {
					t.Errorf("no batch ended %s (got %v): the case does not cover it", k, kinds)
				}
			}
			t.Logf("%d env steps, batch ends %v", r.envSteps(), kinds)
		})
	}
}

// TestVersionCuts: with version_cuts a batch ends where an action of a
// newer policy version than all its steps comes, so that each holds one
// version; without, a batch holds several and says the oldest. Versions
// that take turns (two policy workers a version apart) cut once, not at
// every step.
func TestVersionCuts(t *testing.T) {
	rising := func(id stream.ReqID) int64 { return probeVersion + int64(id)/37 }
	alternating := func(id stream.ReqID) int64 { return probeVersion + int64(id)%2 }
	cases := []struct {
		name     string
		cfg      rigConfig
		want     []string // kinds of batch ends that must occur
		mixed    bool     // some batch holds steps of several versions (else none)
		maxShare float64  // version cuts at most this share of the batches
	}{
		{name: "rising", cfg: rigConfig{sampleSteps: 30, versionCuts: true, versions: rising},
			want: []string{"version cut", "terminated", "truncated", "cut"}, maxShare: 1},
		{name: "rising, spanning", cfg: rigConfig{sampleSteps: 30, span: true, versionCuts: true, versions: rising},
			want: []string{"version cut", "terminated inside", "truncated"}, maxShare: 1},
		{name: "rising, no cuts", cfg: rigConfig{sampleSteps: 30, versions: rising}, mixed: true,
			want: []string{"terminated", "truncated", "cut"}},
		// At most one cut per batch begun at the older version, so no more
		// version cuts than batches of other ends; after one, the batch
		// holds both versions (none newer than its first step).
		{name: "alternating", cfg: rigConfig{sampleSteps: 30, versionCuts: true, versions: alternating},
			want: []string{"version cut", "terminated", "truncated"}, mixed: true, maxShare: 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.env, cfg.envConfig, cfg.ringSize, cfg.actions = env.CartPoleName, map[string]any{"max_episode_steps": 40}, 3, 2
			r := newRig(t, cfg)
			r.run(t, 2000)
			kinds := checkRig(t, r, cfg)
			for _, k := range c.want {
				if kinds[k] == 0 {
					t.Errorf("no batch ended %s (got %v): the case does not cover it", k, kinds)
				}
			}
			var batches, mixed int
			for _, out := range r.outs {
				for _, b := range out.batches {
					batches++
					for i := range b.Len() {
						if r.versioned.versionOf(obsRow(b, i)) != b.PolicyVersion {
							mixed++
							break
						}
					}
				}
			}
			if (mixed > 0) != c.mixed {
				t.Errorf("%d of %d batches hold steps of several versions, want some: %v", mixed, batches, c.mixed)
			}
			if share := float64(kinds["version cut"]) / float64(batches); share > c.maxShare {
				t.Errorf("%d of %d batches cut by a version (%.2f), want at most %.2f", kinds["version cut"], batches, share, c.maxShare)
			}
			t.Logf("%d batches, %d of several versions, batch ends %v", batches, mixed, kinds)
		})
	}
}

// A ring takes in the counts its targets made before they joined it (an
// actor's ring grows by targets made elsewhere), and counts on from there.
func TestRingStatsOfTargetsThatCounted(t *testing.T) {
	cfg := rigConfig{env: env.CartPoleName, ringSize: 3, sampleSteps: 5, actions: 2}
	r := newRig(t, cfg)
	for r.envSteps() < 100 {
		r.poll(t)
	}
	before := r.ring.Stats()
	if before.EnvSteps < 100 || before.BatchesSent == 0 || before.Episodes == 0 {
		t.Fatalf("the run counted %+v: too little to tell", before)
	}
	targets := r.ring.Targets()
	r.ring = actorworker.NewEnvRing(targets[0])
	r.ring.Add(targets[1:]...)
	if got := r.ring.Stats(); got != before {
		t.Fatalf("a new ring of the same targets starts at %+v, want %+v", got, before)
	}
	r.run(t, 200)
	checkRig(t, r, cfg)
}

func TestRingRotation(t *testing.T) {
	for _, size := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprint("ring=", size), func(t *testing.T) {
			r := newRig(t, rigConfig{env: env.CartPoleName, ringSize: size, sampleSteps: 16, actions: 2})
			for range 40 {
				if steps := r.poll(t); steps != size {
					// Inline results are ready at every poll, so every
					// target steps once per turn.
					t.Fatalf("poll took %d steps, want one per target (%d)", steps, size)
				}
			}
			for i, got := range r.log {
				if want := i % size; got != want {
					t.Fatalf("step %d was target %d's, want %d's (order %v)", i, got, want, r.log[:i+1])
				}
			}
			r.drain(t)
			checkRig(t, r, rigConfig{actions: 2, sampleSteps: 16})
		})
	}
}

func TestMultiAgentSharedReward(t *testing.T) {
	cfg := rigConfig{env: env.SimpleSpreadName, envConfig: map[string]any{"n_agents": 3, "max_cycles": 30},
		ringSize: 1, sampleSteps: 8, actions: 5}
	r := newRig(t, cfg)
	r.run(t, 200)
	checkRig(t, r, cfg)
	byAgent := r.outs[0].byAgent()
	ids := []string{"agent_0", "agent_1", "agent_2"}
	if got := slices.Sorted(maps.Keys(byAgent)); !slices.Equal(got, ids) {
		t.Fatalf("batches for agents %v, want one stream per agent %v", got, ids)
	}
	ref := byAgent["agent_0"]
	for _, id := range ids[1:] {
		bs := byAgent[id]
		if len(bs) != len(ref) {
			t.Fatalf("%s has %d batches, agent_0 %d", id, len(bs), len(ref))
		}
		for k := range bs {
			if !slices.Equal(bs[k].Rewards.Data, ref[k].Rewards.Data) {
				t.Fatalf("batch %d: %s rewards %v, agent_0 %v: want the shared reward", k, id, bs[k].Rewards.Data, ref[k].Rewards.Data)
			}
			if slices.Equal(bs[k].Obs.Data, ref[k].Obs.Data) {
				t.Fatalf("batch %d: %s has agent_0's observations", k, id)
			}
		}
	}
}

// TestTurns: in a game whose agents take turns (api.Turns), each agent's
// batches hold the steps it moved in, observed at its turn, with the
// reward of the opponent's reply credited to its move: the loser's last
// move carries the -1 of the winner's. The same with batches spanning
// episodes.
func TestTurns(t *testing.T) {
	for _, span := range []bool{false, true} {
		t.Run(fmt.Sprintf("span_episodes=%v", span), func(t *testing.T) { testTurns(t, span) })
	}
}

func testTurns(t *testing.T, span bool) {
	cfg := rigConfig{env: env.Connect4Name, ringSize: 2, sampleSteps: 5, span: span, actions: 7}
	r := newRig(t, cfg)
	r.run(t, 600)
	var wins, spanned int
	for i, tg := range r.ring.Targets() {
		st := tg.Stats()
		e := r.envs[i]
		byAgent := r.outs[i].byAgent()
		var idleOpen int64
		var returns [2][]float32
		for j, a := range tg.Agents() {
			batches := byAgent[a.ID()]
			var steps int64
			for _, b := range batches {
				steps += int64(b.Len())
				if terminatesInside(b) {
					spanned++
				}
				for k := range b.Len() {
					// Plane 2 is ones when it is the observer's turn.
					if obs := obsRow(b, k); obs[2] != 1 {
						t.Fatalf("target %d agent %s: a step recorded with an observation off its turn", i, a.ID())
					}
				}
				for _, ep := range b.Episodes {
					returns[j] = append(returns[j], ep.Return)
				}
			}
			// Drain drops the move of the agent that sat out the last step
			// (no value of its next turn's observation exists to end it).
			idleOpen += e.acted[j] - steps
			checkBatches(t, batches, make([][]float32, e.ends), r.rules(cfg), steps, st.Episodes)
		}
		if idleOpen < 0 || idleOpen > 1 {
			t.Errorf("target %d: %d moves not recorded, want 0 or 1 (the idle agent's at drain)", i, idleOpen)
		}
		if int64(len(returns[0])) != st.Episodes || len(returns[1]) != len(returns[0]) {
			t.Fatalf("target %d: %d and %d episode returns for %d episodes", i, len(returns[0]), len(returns[1]), st.Episodes)
		}
		for k := range returns[0] {
			a, b := returns[0][k], returns[1][k]
			if a+b != 0 || (a != 0 && a != 1 && a != -1) {
				t.Fatalf("target %d episode %d: returns %v and %v, want +1/-1 or a draw", i, k, a, b)
			}
			if a != 0 {
				wins++
			}
		}
		if st.AgentSteps >= 2*st.EnvSteps {
			t.Errorf("target %d: %d agent steps recorded for %d env steps: both agents recorded every step", i, st.AgentSteps, st.EnvSteps)
		}
	}
	if wins == 0 {
		t.Error("no game was won")
	}
	if (spanned > 0) != span {
		t.Errorf("%d batches hold a termination before their last step, with span_episodes=%v", spanned, span)
	}
}

func TestBackpressure(t *testing.T) {
	cases := []struct {
		name   string
		refuse func(post int) bool
	}{
		{"first posts refused", func(n int) bool { return n < 6 }},
		{"every other post refused", func(n int) bool { return n%2 == 0 }},
		{"bursts", func(n int) bool { return n%10 < 7 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := rigConfig{env: env.CartPoleName, envConfig: map[string]any{"max_episode_steps": 20},
				ringSize: 2, sampleSteps: 6, actions: 2, refuse: c.refuse}
			r := newRig(t, cfg)
			for r.envSteps() < 400 {
				r.poll(t)
				for _, tg := range r.ring.Targets() {
					for _, a := range tg.Agents() {
						// One refused batch, plus one waiting for its bootstrap
						// value at most: memory stays bounded.
						if a.Unsent() > 2 {
							t.Fatalf("agent holds %d unsent batches", a.Unsent())
						}
					}
				}
			}
			r.drain(t)
			checkRig(t, r, cfg)
			for i, tg := range r.ring.Targets() {
				if got, want := tg.Stats().Backpressure, int64(r.outs[i].refused); got != want || want == 0 {
					t.Errorf("target %d counted %d back-pressure events, producer refused %d", i, got, want)
				}
			}
		})
	}
}

func TestBackpressureStopsStepping(t *testing.T) {
	closed := true
	cfg := rigConfig{env: env.CartPoleName, ringSize: 2, sampleSteps: 10, actions: 2,
		refuse: func(int) bool { return closed }}
	r := newRig(t, cfg)
	for range 200 {
		r.poll(t)
	}
	// Each target fills one batch (or ends an episode earlier), cannot
	// send it, and stops.
	if n := r.envSteps(); n > 2*10 {
		t.Fatalf("%d env steps with every batch refused, want at most one batch per target", n)
	}
	stuck := r.envSteps()
	closed = false
	r.run(t, stuck+200)
	checkRig(t, r, cfg)
}

// flakyClient fails every consume of an id divisible by every, after
// taking the real result, as a timed-out remote request would.
type flakyClient struct {
	stream.InferenceClient
	every  int64
	failed int64
}

func (c *flakyClient) Consume(id stream.ReqID) (stream.InferenceResult, error) {
	res, err := c.InferenceClient.Consume(id)
	if err == nil && int64(id)%c.every == 0 {
		c.failed++
		return stream.InferenceResult{}, fmt.Errorf("flaky: request %d: %w", id, stream.ErrInferenceFailed)
	}
	return res, err
}

func TestInferenceFailures(t *testing.T) {
	for _, c := range []struct {
		env   string
		cfg   map[string]any
		every int64
	}{
		{env.CartPoleName, map[string]any{"max_episode_steps": 20}, 4},
		{env.CartPoleName, nil, 2},
		{env.SimpleSpreadName, map[string]any{"max_cycles": 20}, 3},
	} {
		t.Run(fmt.Sprintf("%s/every=%d", c.env, c.every), func(t *testing.T) {
			var flaky *flakyClient
			actions := 2
			if c.env == env.SimpleSpreadName {
				actions = 5
			}
			cfg := rigConfig{env: c.env, envConfig: c.cfg, ringSize: 2, sampleSteps: 7, actions: actions,
				wrap: func(ic stream.InferenceClient) stream.InferenceClient {
					flaky = &flakyClient{InferenceClient: ic, every: c.every}
					return flaky
				}}
			r := newRig(t, cfg)
			r.run(t, 300)
			checkRig(t, r, cfg)
			var counted int64
			for _, tg := range r.ring.Targets() {
				counted += tg.Stats().InferenceFailures
			}
			if counted != flaky.failed || counted == 0 {
				t.Errorf("targets counted %d inference failures, %d were injected", counted, flaky.failed)
			}
		})
	}
}

func TestEnvSeed(t *testing.T) {
	seen := map[int64]string{}
	for seed := range int64(4) {
		for target := range 8 {
			for ep := range 100 {
				s := actorworker.EnvSeed(seed, target, ep)
				key := fmt.Sprint(seed, target, ep)
				if prev, dup := seen[s]; dup {
					t.Fatalf("seed %d for both %s and %s", s, prev, key)
				}
				seen[s] = key
			}
		}
	}
	if got := actorworker.EnvSeed(2, 3, 4); got != 2*1000003+3*7919+4 {
		t.Errorf("EnvSeed(2, 3, 4) = %d", got)
	}
}

func TestNewEnvTargetErrors(t *testing.T) {
	e := newEnv(t, env.CartPoleName, nil)
	client := stream.NewInlineInferenceClient(&probePolicy{actions: 2}, 4)
	defer client.Close()
	for _, c := range []struct {
		name string
		cfg  actorworker.TargetConfig
	}{
		{"no client", actorworker.TargetConfig{Producer: &collector{}}},
		{"no producer", actorworker.TargetConfig{Client: client}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := actorworker.NewEnvTarget(e, 0, c.cfg); err == nil {
				t.Error("NewEnvTarget succeeded")
			}
		})
	}
}

var _ api.Policy = (*probePolicy)(nil)
