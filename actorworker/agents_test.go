package actorworker_test

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// spreadConfig is the simple_spread of the agents tests: three agents,
// agent_0 to agent_2.
var spreadConfig = map[string]any{"n_agents": 3, "max_cycles": 25}

// spreadActor is an actor configuration on simple_spread with agents.
func spreadActor(agents ...map[string]any) map[string]any {
	return map[string]any{"env": env.SimpleSpreadName, "env_config": spreadConfig, "agents": agents}
}

func TestAgentsConfigRejects(t *testing.T) {
	red, blue := map[string]any{"match": "agent_0", "policy": "red"}, map[string]any{"match": "agent_[12]", "policy": "blue"}
	with := func(m map[string]any, kv ...any) map[string]any {
		m = maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	withActor := func(cfg map[string]any, k string, v any) map[string]any { cfg[k] = v; return cfg }
	cases := []struct {
		name string
		cfg  map[string]any
		want []string // what the error must name
	}{
		{"agent matched by no mapping", spreadActor(red, with(blue, "match", "agent_1")), []string{"agents", `"agent_2"`, "no mapping"}},
		{"mapping that matches no agent", spreadActor(red, blue, map[string]any{"match": "agent_9", "policy": "green"}),
			[]string{"agents[2]", "agent_0"}},
		{"mapping whose agents earlier mappings took", spreadActor(with(red, "match", "agent_.*"), blue),
			[]string{"agents[1]", `"agent_1" went to agents[0]`}},
		{"bad regexp", spreadActor(red, with(blue, "match", "agent_[12")), []string{"agents[1]", "match", "agent_[12"}},
		{"match and indices", spreadActor(with(red, "indices", []int{0}), blue), []string{"agents[0]", "match", "indices"}},
		{"neither match nor indices", spreadActor(red, with(blue, "match", nil)), []string{"agents[1]", "match", "indices"}},
		{"index out of range", spreadActor(red, map[string]any{"indices": []int{1, 3}, "policy": "blue"}), []string{"agents[1]", "index 3", "3 agents"}},
		{"negative index", spreadActor(red, map[string]any{"indices": []int{-1, 1, 2}, "policy": "blue"}), []string{"agents[1]", "index -1"}},
		{"missing policy", spreadActor(red, with(blue, "policy", nil)), []string{"agents[1]", "policy"}},
		{"one policy, two sample streams", spreadActor(red, with(blue, "match", "agent_1"), map[string]any{"match": "agent_2", "policy": "blue", "sample_stream": "blue2"}),
			[]string{"agents[2]", `"blue"`, `"blue2"`, "agents[1]"}},
		{"one policy, a sample stream and a replay", spreadActor(red, with(blue, "match", "agent_1"), map[string]any{"match": "agent_2", "policy": "blue", "replay_stream": "r"}),
			[]string{"agents[2]", `"blue"`, "replay"}},
		{"one policy, inline and remote", spreadActor(red, with(blue, "match", "agent_1"), map[string]any{"match": "agent_2", "policy": "blue", "inference": "inline"}),
			[]string{"agents[2]", `"blue"`, "inline"}},
		{"actor-level policy", withActor(spreadActor(red, blue), "policy", "default"), []string{"policy", "agents mapping"}},
		{"actor-level sample_stream", withActor(spreadActor(red, blue), "sample_stream", "s"), []string{"sample_stream", "agents mapping"}},
		{"actor-level replay_stream", withActor(spreadActor(red, blue), "replay_stream", "r"), []string{"replay_stream", "agents mapping"}},
		{"mapping with sample and replay streams", spreadActor(red, with(blue, "sample_stream", "b", "replay_stream", "r")), []string{"agents[1]", "sample_stream", "replay_stream"}},
		{"mapping inference mode", spreadActor(red, with(blue, "inference", "psychic")), []string{"agents[1]", "psychic"}},
		{"mapping epsilon", spreadActor(red, with(blue, "epsilon", 1.5)), []string{"agents[1]", "epsilon"}},
		{"deterministic remote mapping", spreadActor(with(red, "deterministic", true), blue), []string{"agents[0]", "deterministic", "inline"}},
		{"misspelt mapping key", spreadActor(red, with(blue, "polcy", "x")), []string{"agents[1]", "polcy", "known:"}},
		{"mistyped mapping key", spreadActor(red, with(blue, "indices", "0")), []string{"agents[1]", "indices", "want a list"}},
		{"mapping not a mapping", map[string]any{"env": env.SimpleSpreadName, "env_config": spreadConfig, "agents": []any{red, "agent_1"}},
			[]string{"agents[1]", "want a mapping"}},
		{"inline mapping's bad policy", withActor(spreadActor(with(red, "inference", "inline"), blue), "activation", "sigmoid-ish"),
			[]string{"agents[0]", "inline policy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := actorworker.CheckConfig(workertest.Args(t, c.cfg), 0)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Type != rpc.ErrTypeBadArguments {
				t.Fatalf("CheckConfig: %v, want a %s error", err, rpc.ErrTypeBadArguments)
			}
			t.Log(err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	// What the refusals are not: mappings by indices and by patterns, a
	// policy over two mappings with its one stream, inline and remote.
	for _, cfg := range []map[string]any{
		spreadActor(red, blue),
		spreadActor(map[string]any{"indices": []int{2, 0}, "policy": "red", "inference": "inline", "deterministic": true, "epsilon": 0.1},
			map[string]any{"match": ".*", "policy": "blue", "sample_stream": "null", "sample_steps": 5}),
		spreadActor(red, with(blue, "match", "agent_1"), map[string]any{"match": "agent_2", "policy": "blue", "epsilon": 0.3}),
		spreadActor(red, with(blue, "replay_stream", "r", "replay_table", "t")),
	} {
		if err := actorworker.CheckConfig(workertest.Args(t, cfg), 0); err != nil {
			t.Errorf("CheckConfig(%v): %v", cfg["agents"], err)
		}
	}
}

// twoPolicies maps agent_0 of simple_spread to policy red (deterministic,
// batches of 10) and agents 1 and 2 to blue (batches of 7), each with the
// sample stream of its name. The actor's seed is spreadSeed: inline, red's
// network has that seed and blue's the next, as the policy workers of the
// remote cases are given.
func twoPolicies(red, blue map[string]any) map[string]any {
	r := map[string]any{"indices": []int{0}, "policy": "red", "sample_steps": 10}
	b := map[string]any{"match": "agent_[12]", "policy": "blue", "sample_steps": 7}
	maps.Copy(r, red)
	maps.Copy(b, blue)
	cfg := spreadActor(r, b)
	maps.Copy(cfg, map[string]any{"seed": spreadSeed, "hidden": []int{16, 16}, "ring_size": 2, "max_env_steps": 200})
	return cfg
}

const spreadSeed = 3

// spreadNet is the network of a policy of the tests' simple_spread with
// seed, as the actor's inline policy and a policy worker build it.
func spreadNet(t *testing.T, seed int64, deterministic bool) api.Policy {
	t.Helper()
	pc, err := policy.ConfigForEnv(env.SimpleSpreadName, spreadConfig)
	if err != nil {
		t.Fatal(err)
	}
	pc.Seed, pc.Deterministic = seed, deterministic
	pc = pc.WithShape([]int{16, 16}, "")
	p, err := policy.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentsTwoPolicies runs simple_spread with agent_0 on policy red and
// agents 1 and 2 on blue, inline, behind two policy workers, and mixed:
// each stream gets its policy's agents' batches only, each cut at its
// mapping's sample_steps, and every value (and red's greedy action) is the
// one its policy's network gives, so each request went to its policy.
func TestAgentsTwoPolicies(t *testing.T) {
	cases := []struct {
		name      string
		red, blue map[string]any
		workers   []string // policies served by a policy worker
	}{
		{"inline", map[string]any{"inference": "inline", "deterministic": true}, map[string]any{"inference": "inline"}, nil},
		{"remote", nil, nil, []string{"red", "blue"}},
		{"mixed", map[string]any{"inference": "inline", "deterministic": true}, nil, []string{"blue"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := newCluster(t)
			for i, p := range c.workers {
				pw := cl.start(t, policyworker.TypeName, i)
				cl.run(t, pw, map[string]any{"policy": p, "env": env.SimpleSpreadName, "env_config": spreadConfig,
					"hidden": []int{16, 16}, "seed": spreadSeed + int64(slices.Index([]string{"red", "blue"}, p)), "deterministic": p == "red"})
			}
			redC, blueC := newConsumer(t, cl.repo, "red"), newConsumer(t, cl.repo, "blue")
			actor := cl.start(t, actorworker.TypeName, 0)
			cl.run(t, actor, twoPolicies(c.red, c.blue))
			cl.waitState(t, actor, member.StateCompleted, redC, blueC)
			st := cl.stats(t, actor)
			pols, _ := st["policies"].(map[string]any)
			if len(pols) != 2 {
				t.Fatalf("policies stat %v, want red and blue", st["policies"])
			}
			polStat := func(p, key string) int64 { return statInt(t, pols[p].(map[string]any), key) }
			waitFor(t, "every batch", func() bool {
				return int64(len(redC.batches)) >= polStat("red", "batches_sent") && int64(len(blueC.batches)) >= polStat("blue", "batches_sent")
			}, redC, blueC)
			envSteps := statInt(t, st, "env_steps")
			nets := map[string]api.Policy{"red": spreadNet(t, spreadSeed, true), "blue": spreadNet(t, spreadSeed+1, false)}
			for _, x := range []struct {
				policy      string
				c           *consumer
				agents      []string
				sampleSteps int
			}{{"red", redC, []string{"agent_0"}, 10}, {"blue", blueC, []string{"agent_1", "agent_2"}, 7}} {
				if len(x.c.batches) == 0 {
					t.Fatalf("no batch on the %s stream", x.policy)
				}
				// Each agent of each environment: the ring's environments
				// share agent ids, so each agent's steps add up to the
				// actor's env_steps.
				steps := map[string]int64{}
				longest := 0
				for _, b := range x.c.batches {
					if b.Policy != x.policy || !slices.Contains(x.agents, b.AgentID) {
						t.Fatalf("%s stream: a batch of policy %q, agent %q; want policy %q, agents %v", x.policy, b.Policy, b.AgentID, x.policy, x.agents)
					}
					steps[b.AgentID] += int64(b.Len())
					longest = max(longest, b.Len())
					checkPolicyAnswers(t, nets[x.policy], x.policy == "red", b)
				}
				// Episodes of 25 steps: batches cut at the mapping's length.
				if longest != x.sampleSteps {
					t.Errorf("%s stream: batches of up to %d steps, want the mapping's sample_steps %d", x.policy, longest, x.sampleSteps)
				}
				for _, a := range x.agents {
					if steps[a] != envSteps {
						t.Errorf("%s stream: %d steps of %s, want the actor's %d", x.policy, steps[a], a, envSteps)
					}
				}
				if got, want := polStat(x.policy, "agent_steps"), envSteps*int64(len(x.agents)); got != want {
					t.Errorf("policies.%s.agent_steps %d, want %d", x.policy, got, want)
				}
				if got, want := polStat(x.policy, "batches_sent"), int64(len(x.c.batches)); got != want {
					t.Errorf("policies.%s.batches_sent %d, the stream received %d", x.policy, got, want)
				}
				if got, want := polStat(x.policy, "episodes"), statInt(t, st, "episodes"); got != want || got == 0 {
					t.Errorf("policies.%s.episodes %d, the actor's %d", x.policy, got, want)
				}
				// simple_spread's reward is shared: each policy's mean
				// return is the first agent's, the actor's.
				ret, _ := api.Config(pols[x.policy].(map[string]any)).Float("mean_return", math.NaN())
				if want := st["mean_return"].(float64); math.Abs(ret-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("policies.%s.mean_return %v, the actor's %v", x.policy, ret, want)
				}
			}
			if got, want := statInt(t, st, "batches_sent"), int64(len(redC.batches)+len(blueC.batches)); got != want {
				t.Errorf("batches_sent %d, the streams received %d", got, want)
			}
		})
	}
}

// checkPolicyAnswers checks that the values of b (and, for a
// deterministic policy, its actions) are net's for b's observations.
func checkPolicyAnswers(t *testing.T, net api.Policy, deterministic bool, b *api.SampleBatch) {
	t.Helper()
	var out api.Inference
	if err := net.Infer(b.Obs.Tensor, &out); err != nil {
		t.Fatal(err)
	}
	for i := range b.Len() {
		if got, want := b.Values.Data[i], out.Values.Data[i]; math.Abs(float64(got-want)) > 1e-4 {
			t.Fatalf("policy %s agent %s step %d: value %v, its policy's network gives %v", b.Policy, b.AgentID, i, got, want)
		}
		if deterministic && b.Actions.Data[i] != out.Actions.Data[i] {
			t.Fatalf("policy %s agent %s step %d: action %d, its policy's greedy action %d", b.Policy, b.AgentID, i, b.Actions.Data[i], out.Actions.Data[i])
		}
	}
}

// TestAgentsSockets: an actor waits on the socket of each remote policy.
func TestAgentsSockets(t *testing.T) {
	repo := workertest.Repo(t)
	for _, c := range []struct {
		name     string
		cfg      map[string]any
		want     int  // sockets
		policies bool // the policies stat: more than one policy
	}{
		{"two remote", twoPolicies(map[string]any{"sample_stream": "null"}, map[string]any{"sample_stream": "null"}), 2, true},
		{"inline and remote", twoPolicies(map[string]any{"sample_stream": "null", "inference": "inline"}, map[string]any{"sample_stream": "null"}), 1, true},
		{"one policy, two mappings", spreadActor(map[string]any{"indices": []int{0}, "policy": "p", "sample_stream": "null"},
			map[string]any{"indices": []int{1, 2}, "policy": "p", "sample_stream": "null", "epsilon": 0.5}), 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial, Repo: repo, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer impl.Close()
			if err := impl.Configure(ctxT(t), workertest.Args(t, c.cfg)); err != nil {
				t.Fatal(err)
			}
			socks := impl.(worker.SocketOwner).Sockets()
			if len(socks) != c.want || slices.Contains(socks, nil) {
				t.Errorf("Sockets() = %v, want %d non-nil", socks, c.want)
			}
			if _, ok := impl.Stats()["policies"]; ok != c.policies {
				t.Errorf("policies stat present: %v, want %v", ok, c.policies)
			}
		})
	}
}

// countingClient counts the observations posted to it.
type countingClient struct {
	stream.InferenceClient
	posted int
}

func (c *countingClient) Post(obs []float32) (stream.ReqID, error) {
	c.posted++
	return c.InferenceClient.Post(obs)
}

// TestTargetRoutes: a target whose agents are routed to two policies asks
// each agent's client, sends each agent's batches through its producer,
// labelled with its policy and cut at its own sample_steps, and reports
// each policy's episode returns.
func TestTargetRoutes(t *testing.T) {
	e := &recordingEnv{Env: newEnv(t, env.SimpleSpreadName, map[string]any{"n_agents": 3, "max_cycles": 30})}
	obsDim := e.ObservationSpace().Size()
	clients := map[string]*countingClient{
		"red":  {InferenceClient: stream.NewInlineInferenceClient(&probePolicy{actions: 5}, obsDim)},
		"blue": {InferenceClient: stream.NewInlineInferenceClient(&probePolicy{actions: 5}, obsDim)},
	}
	outs := map[string]*collector{"red": {}, "blue": {}}
	steps := map[string]int{"red": 4, "blue": 9}
	policyOf := func(agent int) string { return []string{"red", "blue", "blue"}[agent] }
	returns := map[string][]float64{}
	tg, err := actorworker.NewEnvTarget(e, 0, actorworker.TargetConfig{
		ActorID: "actor/0", Seed: 1,
		Route: func(agent int, id string) actorworker.AgentRoute {
			p := policyOf(agent)
			if id != []string{"agent_0", "agent_1", "agent_2"}[agent] {
				t.Errorf("route asked for agent %d as %q", agent, id)
			}
			return actorworker.AgentRoute{Client: clients[p], Producer: outs[p], Policy: p, SampleSteps: steps[p]}
		},
		OnPolicyEpisode: func(p string, ret float64) { returns[p] = append(returns[p], ret) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	flush := func() {
		for _, c := range clients {
			if err := c.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tg.Reset(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	flush()
	for polls := 0; tg.Stats().EnvSteps < 200; polls++ {
		if polls > 10000 {
			t.Fatal("no progress")
		}
		if _, err := tg.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		flush()
	}
	tg.Drain()
	for polls := 0; !tg.AllDone(); polls++ {
		if polls > 10000 {
			t.Fatal("did not drain")
		}
		if _, err := tg.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		flush()
	}
	st := tg.Stats()
	if r, b := clients["red"].posted, clients["blue"].posted; r == 0 || b != 2*r {
		t.Errorf("red's client got %d requests, blue's %d: want one agent's and two agents'", r, b)
	}
	for j, a := range tg.Agents() {
		p := policyOf(j)
		final := make([][]float32, len(e.finalObs))
		for k, obs := range e.finalObs {
			final[k] = obs[j]
		}
		batches := outs[p].byAgent()[a.ID()]
		checkBatches(t, batches, final, batchRules{actions: 5, sampleSteps: steps[p]}, st.EnvSteps, st.Episodes)
		for _, b := range batches {
			if b.Policy != p {
				t.Fatalf("agent %s: a batch of policy %q, want %q", a.ID(), b.Policy, p)
			}
		}
		if a.Policy() != p {
			t.Errorf("agent %s: Policy() %q, want %q", a.ID(), a.Policy(), p)
		}
	}
	// The reward is shared: each policy's episode return is each of its
	// agents', agent_0's.
	var want []float64
	for _, b := range outs["red"].batches {
		for _, ep := range b.Episodes {
			want = append(want, float64(ep.Return))
		}
	}
	for _, p := range []string{"red", "blue"} {
		if int64(len(returns[p])) != st.Episodes || !slices.Equal(returns[p], want) {
			t.Errorf("%s: episode returns %v, want agent_0's %v (%d episodes)", p, returns[p], want, st.Episodes)
		}
	}
}
