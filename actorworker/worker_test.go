package actorworker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/pyenv"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// testTypes are the worker types these tests run.
var testTypes = workertest.Registry(map[string]worker.Factory{
	actorworker.TypeName:  actorworker.New,
	policyworker.TypeName: policyworker.New,
})

var testTrial = names.NewTrial("unit", "actorworker")

func testLogger(t testing.TB) *slog.Logger { return workertest.Logger(t, slog.LevelInfo) }

func ctxT(t testing.TB) context.Context { return workertest.Ctx(t, 20*time.Second) }

// cluster is workers running in-process, driven through a control panel,
// that record into the registry metrics, as the workers of a process do.
type cluster struct {
	repo    nameresolve.Repository
	panel   *panel.ControlPanel
	metrics *telemetry.Registry
}

func newCluster(t *testing.T) *cluster {
	repo := workertest.Repo(t)
	return &cluster{repo: repo, panel: workertest.Panel(t, repo, testTrial), metrics: telemetry.NewRegistry()}
}

// start runs worker typ/index until the test ends and returns its name.
func (c *cluster) start(t *testing.T, typ string, index int) string {
	t.Helper()
	return workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: typ, Index: index, Host: "127.0.0.1", Repo: c.repo,
		IdleWait: 20 * time.Millisecond, Logger: testLogger(t), Metrics: c.metrics, ConditionHold: 200 * time.Millisecond,
	}).Name()
}

func (c *cluster) request(t *testing.T, name, cmd string, kwargs any) {
	t.Helper()
	if err := c.panel.Request(ctxT(t), name, cmd, kwargs, nil); err != nil {
		t.Fatalf("%s %s: %v", cmd, name, err)
	}
}

// run configures and starts a worker.
func (c *cluster) run(t *testing.T, name string, cfg map[string]any) {
	t.Helper()
	c.request(t, name, member.CmdConfigure, cfg)
	c.request(t, name, member.CmdStart, nil)
}

func (c *cluster) status(t *testing.T, name string) member.Status {
	t.Helper()
	var s member.Status
	if err := c.panel.Request(ctxT(t), name, member.CmdStatus, nil, &s); err != nil {
		t.Fatalf("status %s: %v", name, err)
	}
	return s
}

func (c *cluster) stats(t *testing.T, name string) map[string]any {
	t.Helper()
	var s map[string]any
	if err := c.panel.Request(ctxT(t), name, member.CmdStats, nil, &s); err != nil {
		t.Fatalf("stats %s: %v", name, err)
	}
	return s
}

// statInt reads an integer figure of a stats reply.
func statInt(t *testing.T, s map[string]any, key string) int64 {
	t.Helper()
	n, err := api.Config(s).Int(key, -1)
	if err != nil || n < 0 {
		t.Fatalf("stats %q = %v (%v)", key, s[key], err)
	}
	return int64(n)
}

// consumer collects a sample stream.
type consumer struct {
	c       *stream.SampleConsumer
	batches []*api.SampleBatch
}

func newConsumer(t *testing.T, repo nameresolve.Repository, name string) *consumer {
	t.Helper()
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: repo, Trial: testTrial, Stream: name, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &consumer{c: c}
}

func (c *consumer) poll(t *testing.T) {
	t.Helper()
	bs, err := c.c.Poll(64)
	if err != nil {
		t.Fatal(err)
	}
	c.batches = append(c.batches, bs...)
}

// waitFor polls cond (and the consumers) until it holds.
func waitFor(t *testing.T, what string, cond func() bool, consumers ...*consumer) {
	t.Helper()
	eventually.True(t, 20*time.Second, what, func() bool {
		if cond() {
			return true
		}
		for _, c := range consumers {
			c.poll(t)
		}
		return false
	})
}

func (c *cluster) waitState(t *testing.T, name string, want member.State, consumers ...*consumer) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s to be %s", name, want), func() bool {
		s := c.status(t, name)
		if s.State == member.StateError {
			t.Fatalf("%s failed: %s", name, s.Error)
		}
		return s.State == want
	}, consumers...)
}

func TestActorCompletes(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
		// turns: the agents take turns, so each env step records one
		// agent's transition at most (and the batches' agents are 2).
		turns bool
	}{
		{name: "inline null ring 1", cfg: map[string]any{"inference": "inline", "sample_stream": "null", "ring_size": 1, "max_env_steps": 300}},
		{name: "inline null defaults", cfg: map[string]any{"inference": "inline", "sample_stream": "null", "max_env_steps": 300}},
		{name: "inline stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "ring_size": 3,
			"sample_steps": 32, "max_env_steps": 1000}},
		{name: "inline stream spanning episodes", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "ring_size": 3,
			"sample_steps": 32, "span_episodes": true, "max_env_steps": 1000}},
		{name: "simple_spread stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "env": env.SimpleSpreadName,
			"env_config": map[string]any{"n_agents": 2, "max_cycles": 25}, "sample_steps": 10, "max_env_steps": 200}},
		// Python environments: the ring is one host process, stepped as a batch.
		{name: "python cartpole stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "env": pyenv.Name, "ring_size": 4,
			"env_config": map[string]any{"module": "distrl.examples.cartpole"}, "sample_steps": 32, "max_env_steps": 1000}},
		{name: "python parallel env stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "env": pyenv.Name, "ring_size": 3,
			"env_config":   map[string]any{"module": "distrl.examples.spread", "kwargs": map[string]any{"n_agents": 2, "max_cycles": 25}},
			"sample_steps": 10, "max_env_steps": 200}},
		// Two players taking turns (acting()): only the mover is asked and recorded.
		{name: "python turns stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "env": pyenv.Name, "ring_size": 3,
			"env_config": map[string]any{"module": "distrl.examples.nim"}, "sample_steps": 8, "max_env_steps": 300}, turns: true},
		// Box actions from the Gaussian head, clipped by the host.
		{name: "python box actions stream", cfg: map[string]any{"inference": "inline", "sample_stream": "s", "env": pyenv.Name, "ring_size": 2,
			"env_config":   map[string]any{"module": "badenvs", "factory": "multidiscrete_observations", "path": []any{pyTestdata(t)}},
			"sample_steps": 8, "max_env_steps": 120}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cfg["env"] == pyenv.Name {
				c.cfg["env_config"].(map[string]any)["python"] = pytest.Python(t)
			}
			cl := newCluster(t)
			var cons []*consumer
			if c.cfg["sample_stream"] != "null" {
				cons = append(cons, newConsumer(t, cl.repo, "s"))
			}
			name := cl.start(t, actorworker.TypeName, 0)
			cl.run(t, name, c.cfg)
			cl.waitState(t, name, member.StateCompleted, cons...)
			st := cl.stats(t, name)
			if got, want := statInt(t, st, "env_steps"), int64(c.cfg["max_env_steps"].(int)); got != want {
				t.Errorf("env_steps %d, want max_env_steps %d", got, want)
			}
			if statInt(t, st, "episodes") == 0 || st["mean_length"].(float64) <= 0 {
				t.Errorf("no episode finished: %v", st)
			}
			if ring, ok := c.cfg["ring_size"].(int); ok && statInt(t, st, "ring_size") != int64(ring) {
				t.Errorf("ring_size %v, want %d", st["ring_size"], ring)
			}
			if c.cfg["env"] == pyenv.Name {
				if n := len(envHosts(t)); n != 1 {
					t.Errorf("%d Python environment hosts for a ring of %v, want 1", n, c.cfg["ring_size"])
				}
			}
			t.Logf("stats %v", st)
			if len(cons) == 0 {
				return
			}
			sent := statInt(t, st, "batches_sent")
			waitFor(t, "every batch", func() bool { return int64(len(cons[0].batches)) >= sent }, cons...)
			var steps, episodes, spanned int64
			for _, b := range cons[0].batches {
				if err := b.Validate(); err != nil {
					t.Fatal(err)
				}
				if b.ActorID != name {
					t.Errorf("batch from %q, want %q", b.ActorID, name)
				}
				steps += int64(b.Len())
				episodes += int64(len(b.Episodes))
				if terminatesInside(*b) {
					spanned++
				}
			}
			if span := c.cfg["span_episodes"] == true; (spanned > 0) != span {
				t.Errorf("%d batches hold a termination before their last step, with span_episodes=%v", spanned, span)
			}
			agents := steps / statInt(t, st, "env_steps")
			if c.turns {
				// One mover per step: at most one transition each (fewer
				// by the moves still open when the actor stopped).
				if envSteps := statInt(t, st, "env_steps"); steps > envSteps || steps < envSteps-int64(c.cfg["ring_size"].(int)) {
					t.Errorf("%d transitions recorded for %d env steps of one mover each", steps, envSteps)
				}
				agents = 2
			}
			if got, want := steps, statInt(t, st, "agent_steps"); got != want || int64(len(cons[0].batches)) != sent {
				t.Errorf("received %d batches of %d steps, the actor sent %d of %d", len(cons[0].batches), got, sent, want)
			}
			if got, want := episodes, agents*statInt(t, st, "episodes"); got != want {
				t.Errorf("batches report %d agent episodes, the actor finished %d episodes of %d agents", got, want, agents)
			}
		})
	}
}

func TestConfigureRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
	}{
		{"misspelt key", map[string]any{"ring_sise": 3}},
		{"inference mode", map[string]any{"inference": "psychic"}},
		{"ring size", map[string]any{"ring_size": -1}},
		{"sample steps", map[string]any{"sample_steps": -5}},
		{"sample queue", map[string]any{"sample_queue": -1}},
		{"max poll steps", map[string]any{"max_poll_steps": -1}},
		{"max env steps", map[string]any{"max_env_steps": -1}},
		{"negative ring slots", map[string]any{"ring_slots": -1}},
		{"more ring slots than environments", map[string]any{"ring_size": 2, "ring_slots": 3}},
		{"ring_max below ring_size", map[string]any{"ring_size": 4, "ring_max": 3}},
		{"unknown env", map[string]any{"env": "Pong-v5"}},
		{"bad env config", map[string]any{"env_config": map[string]any{"max_episode_step": 3}}},
		{"wrong type", map[string]any{"ring_size": "two"}},
		{"inline activation", map[string]any{"inference": "inline", "activation": "sigmoid-ish"}},
		{"inline conv without an image", map[string]any{"inference": "inline", "conv": []map[string]any{{"filters": 4, "kernel": 3, "stride": 1}}}},
		{"inline conv larger than the image", map[string]any{"inference": "inline", "env": "minatar-breakout",
			"conv": []map[string]any{{"filters": 4, "kernel": 11, "stride": 1}}}},
	}
	cl := newCluster(t)
	name := cl.start(t, actorworker.TypeName, 0)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := cl.panel.Request(ctxT(t), name, member.CmdConfigure, c.cfg, nil)
			var re *rpc.Error
			if !errors.As(err, &re) || re.Type != rpc.ErrTypeBadArguments {
				t.Fatalf("configure %v: %v, want a %s error", c.cfg, err, rpc.ErrTypeBadArguments)
			}
			if s := cl.status(t, name); s.State != member.StateReady {
				t.Fatalf("state %s after a bad config, want %s", s.State, member.StateReady)
			}
		})
	}
	err := actorworker.CheckConfig(workertest.Args(t, map[string]any{"inference": "inline", "env": "minatar-breakout",
		"conv": []map[string]any{{"filters": 4, "kernel": 3, "stride": 0}}}), 0)
	if !errors.Is(err, rpc.ErrBadArguments) || !strings.Contains(err.Error(), "conv") {
		t.Errorf("CheckConfig of a conv of stride 0: %v, want bad_arguments naming conv", err)
	}
	// The worker is still usable, with the MinAtar paper's network inline.
	cl.run(t, name, map[string]any{"inference": "inline", "sample_stream": "null", "max_env_steps": 50, "env": "minatar-breakout",
		"conv": []map[string]any{{"filters": 16, "kernel": 3, "stride": 1}}, "hidden": []int{128}, "activation": "relu", "shared_trunk": true})
	cl.waitState(t, name, member.StateCompleted)
}

// TestBackpressureOverStream: with no trainer the actor stops after one
// batch per agent and says why; once one appears, it goes on.
func TestBackpressureOverStream(t *testing.T) {
	cl := newCluster(t)
	name := cl.start(t, actorworker.TypeName, 0)
	cl.run(t, name, map[string]any{"inference": "inline", "sample_stream": "late", "ring_size": 2,
		"sample_steps": 20, "max_env_steps": 600})
	waitFor(t, "a back-pressure warning", func() bool {
		return strings.Contains(cl.status(t, name).Warning, "samples:")
	})
	time.Sleep(100 * time.Millisecond)
	st := cl.stats(t, name)
	if n := statInt(t, st, "env_steps"); n > 2*20 {
		t.Fatalf("%d env steps without a consumer, want at most one batch per target (40)", n)
	}
	if statInt(t, st, "backpressure") == 0 {
		t.Fatalf("no back-pressure counted: %v", st)
	}
	cons := newConsumer(t, cl.repo, "late")
	cl.waitState(t, name, member.StateCompleted, cons)
	if s := cl.status(t, name); s.Warning != "" {
		t.Errorf("warning %q after the consumer appeared", s.Warning)
	}
	var steps int64
	sent := statInt(t, cl.stats(t, name), "batches_sent")
	waitFor(t, "every batch", func() bool { return int64(len(cons.batches)) >= sent }, cons)
	for _, b := range cons.batches {
		steps += int64(b.Len())
	}
	if steps != 600 {
		t.Errorf("received %d steps, want 600", steps)
	}
}

// TestConsumerBoundNote: an actor whose consumer takes nothing is
// back-pressured, which is no warning but a note that the trial is bound
// by its consumer; it goes once the consumer keeps up again.
func TestConsumerBoundNote(t *testing.T) {
	cl := newCluster(t)
	name := cl.start(t, actorworker.TypeName, 0)
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: cl.repo, Trial: testTrial, Stream: "slow", Logger: testLogger(t), RecvHWM: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl.run(t, name, map[string]any{"inference": "inline", "sample_stream": "slow", "ring_size": 2, "sample_steps": 200})
	waitFor(t, "a consumer-bound note", func() bool {
		return strings.Contains(cl.status(t, name).Note, "consumer-bound: back-pressured")
	})
	s, st := cl.status(t, name), cl.stats(t, name)
	if s.Warning != "" {
		t.Errorf("warning %q while back-pressured by a consumer that is there; want none", s.Warning)
	}
	if pct, _ := api.Config(st).Float("backpressured_pct", 0); pct < 100*actorworker.BoundShare {
		t.Errorf("backpressured_pct %v with the note %q", pct, s.Note)
	}
	if got := value(t, cl.metrics, "distrl_actor_backpressured_seconds_total"); got <= 0 {
		t.Errorf("distrl_actor_backpressured_seconds_total = %v", got)
	}
	// A consumer that takes the batches as they come: the share of the
	// last minute falls below ClearShare and the note goes.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if bs, err := c.Poll(1024); err != nil || len(bs) == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; c.Close() })
	waitFor(t, "the note to go", func() bool { return cl.status(t, name).Note == "" })
}

// TestPolicyWorkerLate: requests to a policy that has no worker time out
// and are posted again until one appears; the actor keeps its place, and
// notes that it is waiting for actions.
func TestPolicyWorkerLate(t *testing.T) {
	cl := newCluster(t)
	actor := cl.start(t, actorworker.TypeName, 0)
	cl.run(t, actor, map[string]any{"sample_stream": "null", "inference_timeout_ms": 100, "max_env_steps": 200})
	waitFor(t, "an inference warning", func() bool {
		return strings.Contains(cl.status(t, actor).Warning, "inference:")
	})
	waitFor(t, "an inference failure", func() bool {
		return statInt(t, cl.stats(t, actor), "inference_failures") > 0
	})
	if n := statInt(t, cl.stats(t, actor), "env_steps"); n != 0 {
		t.Fatalf("%d env steps without a policy worker", n)
	}
	// Waiting for actions is also what bounds it: a note besides the warning.
	waitFor(t, "an inference-bound note", func() bool {
		return strings.Contains(cl.status(t, actor).Note, "inference-bound: waited for actions")
	})
	if pct, _ := api.Config(cl.stats(t, actor)).Float("inference_wait_pct", 0); pct < 100*actorworker.BoundShare {
		t.Errorf("inference_wait_pct %v with the inference-bound note", pct)
	}
	pw := cl.start(t, policyworker.TypeName, 0)
	cl.run(t, pw, map[string]any{"env": env.CartPoleName})
	cl.waitState(t, actor, member.StateCompleted)
	if got := statInt(t, cl.stats(t, actor), "env_steps"); got != 200 {
		t.Errorf("env_steps %d, want 200", got)
	}
}

// An actor whose observations do not fit its policy worker (here
// frame_stack given to the policy worker only) fails at once and says why,
// rather than timing out and posting again for ever.
func TestActorFailsOnRefusedInference(t *testing.T) {
	cl := newCluster(t)
	pw := cl.start(t, policyworker.TypeName, 0)
	cl.run(t, pw, map[string]any{"env": env.CartPoleName, "env_config": map[string]any{api.FrameStackKey: 2}})
	actor := cl.start(t, actorworker.TypeName, 0)
	cl.run(t, actor, map[string]any{"sample_stream": "null", "inference_timeout_ms": 60000, "max_env_steps": 200})
	var s member.Status
	waitFor(t, "ERROR", func() bool { s = cl.status(t, actor); return s.State == member.StateError })
	if want := `observations have 4 values, policy "default" wants 8`; !strings.Contains(s.Error, want) {
		t.Errorf("error %q does not say %q", s.Error, want)
	}
	if n := statInt(t, cl.stats(t, pw), "refused"); n < 1 {
		t.Errorf("policy worker refused %d requests", n)
	}
}

// TestInlineMatchesRemote runs the same deterministic policy inline and
// behind a policy worker: the actors must take the same actions. One
// environment per actor, so the order of steps does not depend on when
// replies arrive.
func TestInlineMatchesRemote(t *testing.T) {
	for _, c := range []struct {
		env    string
		config map[string]any
	}{
		{env.CartPoleName, nil},
		{env.SimpleSpreadName, map[string]any{"n_agents": 3, "max_cycles": 25}},
	} {
		t.Run(c.env, func(t *testing.T) {
			cl := newCluster(t)
			common := map[string]any{"env": c.env, "env_config": c.config, "seed": 11, "deterministic": true, "hidden": []int{16, 16}}
			with := func(extra map[string]any) map[string]any {
				m := map[string]any{}
				for _, src := range []map[string]any{common, extra} {
					for k, v := range src {
						m[k] = v
					}
				}
				return m
			}
			pw := cl.start(t, policyworker.TypeName, 0)
			cl.run(t, pw, with(nil))
			inlineC, remoteC := newConsumer(t, cl.repo, "inline"), newConsumer(t, cl.repo, "remote")
			inline := cl.start(t, actorworker.TypeName, 0)
			cl.run(t, inline, with(map[string]any{"inference": "inline", "sample_stream": "inline",
				"ring_size": 1, "sample_steps": 16, "max_env_steps": 300}))
			remote := cl.start(t, actorworker.TypeName, 1)
			cl.run(t, remote, with(map[string]any{"inference": "remote", "sample_stream": "remote",
				"ring_size": 1, "sample_steps": 16, "max_env_steps": 300}))
			cl.waitState(t, inline, member.StateCompleted, inlineC, remoteC)
			cl.waitState(t, remote, member.StateCompleted, inlineC, remoteC)
			for _, x := range []struct {
				name string
				c    *consumer
			}{{inline, inlineC}, {remote, remoteC}} {
				sent := statInt(t, cl.stats(t, x.name), "batches_sent")
				waitFor(t, "every batch", func() bool { return int64(len(x.c.batches)) >= sent }, x.c)
			}
			a, b := trajectories(inlineC.batches), trajectories(remoteC.batches)
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("agents %d inline, %d remote", len(a), len(b))
			}
			for agent, ta := range a {
				tb := b[agent]
				if len(ta.actions) != 300 {
					t.Fatalf("%s: %d steps inline, want 300", agent, len(ta.actions))
				}
				if !slices.Equal(ta.actions, tb.actions) {
					t.Fatalf("%s: actions differ\ninline %v\nremote %v", agent, ta.actions, tb.actions)
				}
				if !slices.Equal(ta.values, tb.values) || !slices.Equal(ta.bootstrap, tb.bootstrap) {
					t.Fatalf("%s: values or bootstrap values differ", agent)
				}
			}
		})
	}
}

type trajectory struct {
	actions           []int32
	values, bootstrap []float32
}

// trajectories concatenates each agent's batches in order.
func trajectories(batches []*api.SampleBatch) map[string]*trajectory {
	m := map[string]*trajectory{}
	for _, b := range batches {
		tr := m[b.AgentID]
		if tr == nil {
			tr = &trajectory{}
			m[b.AgentID] = tr
		}
		tr.actions = append(tr.actions, b.Actions.Data...)
		tr.values = append(tr.values, b.Values.Data...)
		tr.bootstrap = append(tr.bootstrap, b.BootstrapValue)
	}
	return m
}

func TestSockets(t *testing.T) {
	repo := workertest.Repo(t)
	for _, c := range []struct {
		inference string
		want      int
	}{{"inline", 0}, {"remote", 1}} {
		t.Run(c.inference, func(t *testing.T) {
			impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial, Repo: repo, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer impl.Close()
			if err := impl.Configure(ctxT(t), workertest.Args(t, map[string]any{"inference": c.inference, "sample_stream": "null"})); err != nil {
				t.Fatal(err)
			}
			socks := impl.(worker.SocketOwner).Sockets()
			if len(socks) != c.want || slices.Contains(socks, nil) {
				t.Errorf("Sockets() = %v, want %d non-nil", socks, c.want)
			}
		})
	}
}

func TestPollBeforeConfigure(t *testing.T) {
	impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial, Repo: workertest.Repo(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer impl.Close()
	if _, err := impl.Poll(t.Context()); err == nil {
		t.Fatal("Poll before Configure succeeded")
	}
	if w := impl.(worker.Reporter).Warning(); w != "" {
		t.Errorf("warning %q before configure", w)
	}
}

// envHosts returns the pids of this process's Python environment hosts.
func envHosts(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		cmd, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || err2 != nil || !strings.Contains(string(cmd), "distrl.envhost") {
			continue
		}
		// pid (comm) state ppid ...: the fields after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[0] != "Z" && fields[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestActorPythonEnvFails: a Python environment that raises puts the
// actor in ERROR with the Python exception's message, and its host is gone
// once the worker closes.
func TestActorPythonEnvFails(t *testing.T) {
	testdata := pyTestdata(t)
	cases := []struct{ factory, want string }{
		{"raise_at_step", "ValueError: the pole broke at step 3"},
		{"die_at_step", "python environment host exited (exit status 3"},
	}
	for _, c := range cases {
		t.Run(c.factory, func(t *testing.T) {
			cl := newCluster(t)
			name := cl.start(t, actorworker.TypeName, 0)
			cl.run(t, name, map[string]any{"inference": "inline", "sample_stream": "null", "env": pyenv.Name, "ring_size": 2,
				"env_config": map[string]any{"python": pytest.Python(t), "module": "badenvs", "factory": c.factory, "path": []any{testdata}}})
			var s member.Status
			waitFor(t, "ERROR", func() bool { s = cl.status(t, name); return s.State == member.StateError })
			if !strings.Contains(s.Error, c.want) {
				t.Errorf("error %q does not say %q", s.Error, c.want)
			}
			if err := cl.panel.Request(ctxT(t), name, member.CmdExit, nil, nil); err != nil {
				t.Logf("exit: %v", err)
			}
			waitFor(t, "no environment host", func() bool { return len(envHosts(t)) == 0 })
		})
	}
}

// TestPythonActorMatchesGo runs two actors with the same seed and the same
// deterministic inline policy, one on the built-in CartPole and one on the
// Python CartPole of distrl.examples (one host, the ring as one batch): the
// batches they send must be identical, field for field. With a time limit
// of 9 steps, episodes end both ways, so this checks that seeds reach the
// Python environment, that terminated and truncated stay apart, and that
// bootstrap values follow from them exactly as for a Go environment.
func TestPythonActorMatchesGo(t *testing.T) {
	py := pytest.Python(t)
	cl := newCluster(t)
	common := map[string]any{"inference": "inline", "seed": 5, "deterministic": true, "hidden": []int{16, 16},
		"ring_size": 3, "sample_steps": 16, "max_env_steps": 600}
	with := func(extra map[string]any) map[string]any {
		m := maps.Clone(common)
		maps.Copy(m, extra)
		return m
	}
	goC, pyC := newConsumer(t, cl.repo, "go"), newConsumer(t, cl.repo, "py")
	goActor := cl.start(t, actorworker.TypeName, 0)
	cl.run(t, goActor, with(map[string]any{"sample_stream": "go", "env": env.CartPoleName,
		"env_config": map[string]any{"max_episode_steps": 9}}))
	pyActor := cl.start(t, actorworker.TypeName, 1)
	cl.run(t, pyActor, with(map[string]any{"sample_stream": "py", "env": pyenv.Name,
		"env_config": map[string]any{"python": py, "module": "distrl.examples.cartpole", "kwargs": map[string]any{"max_episode_steps": 9}}}))
	cl.waitState(t, goActor, member.StateCompleted, goC, pyC)
	cl.waitState(t, pyActor, member.StateCompleted, goC, pyC)
	for _, x := range []struct {
		name string
		c    *consumer
	}{{goActor, goC}, {pyActor, pyC}} {
		sent := statInt(t, cl.stats(t, x.name), "batches_sent")
		waitFor(t, "every batch", func() bool { return int64(len(x.c.batches)) >= sent }, x.c)
	}
	if len(goC.batches) != len(pyC.batches) {
		t.Fatalf("%d batches from the Go CartPole, %d from the Python one", len(goC.batches), len(pyC.batches))
	}
	var terminated, truncated int
	for i, g := range goC.batches {
		p := pyC.batches[i]
		if !slices.Equal(g.Obs.Data, p.Obs.Data) || !slices.Equal(g.Actions.Data, p.Actions.Data) ||
			!slices.Equal(g.Rewards.Data, p.Rewards.Data) || !slices.Equal(g.Terminated.Data, p.Terminated.Data) ||
			!slices.Equal(g.Truncated.Data, p.Truncated.Data) || !slices.Equal(g.Values.Data, p.Values.Data) ||
			g.BootstrapValue != p.BootstrapValue || !slices.Equal(g.Episodes, p.Episodes) {
			t.Fatalf("batch %d differs:\nGo     %+v\nPython %+v", i, g, p)
		}
		for j := range g.Terminated.Data {
			terminated += int(g.Terminated.Data[j])
			truncated += int(g.Truncated.Data[j])
		}
	}
	if terminated == 0 || truncated == 0 {
		t.Errorf("%d terminated and %d truncated steps: the run should end episodes both ways", terminated, truncated)
	}
	t.Logf("%d identical batches, %d terminated and %d truncated episodes", len(goC.batches), terminated, truncated)
}

// pyTestdata is the directory of pyenv's test environments.
func pyTestdata(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "pyenv", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// An actor whose policy worker answers, but slowly (here each request
// after 3 ms, as a round trip across nodes might take), steps at once
// whenever a reply wakes it: what bounds it is the wait before the reply,
// which inference_wait_pct counts and the note names. Its policy worker is
// on its node (shared memory), so its ring stays as configured.
func TestSlowPolicyWorkerIsInferenceBound(t *testing.T) {
	cl := newCluster(t)
	slowPolicyWorker(t, cl, 3*time.Millisecond)
	actor := cl.start(t, actorworker.TypeName, 0)
	cl.run(t, actor, map[string]any{"sample_stream": "null", "ring_size": 2})
	waitFor(t, "an inference-bound note", func() bool {
		return strings.Contains(cl.status(t, actor).Note, "inference-bound: waited for actions")
	})
	st := cl.stats(t, actor)
	if pct, _ := api.Config(st).Float("inference_wait_pct", 0); pct < 100*actorworker.BoundShare {
		t.Errorf("inference_wait_pct %v for an actor that waits 3 ms for every reply", pct)
	}
	if n := statInt(t, st, "env_steps"); n == 0 {
		t.Error("no steps: the slow policy worker did not answer")
	}
	if n, m := statInt(t, st, "ring_size"), statInt(t, st, "ring_max"); n != 2 || m != 2 {
		t.Errorf("ring_size %d, ring_max %d over shared memory; want 2 and 2", n, m)
	}
}

// TestRingGrowsAcrossNodes: the same slow policy worker reached over
// ZeroMQ, as one on another node is. The actor doubles its ring while it
// waits for actions, up to ring_max (auto: 16 times ring_size), each new
// environment stepping; with ring_max set to ring_size it does not.
func TestRingGrowsAcrossNodes(t *testing.T) {
	t.Setenv(shm.Env, "0")
	tests := []struct {
		name          string
		cfg           map[string]any
		ringMax, grow int64 // grow: the ring it must reach
	}{
		{"auto", map[string]any{"ring_size": 2}, 2 * actorworker.AutoRingGrowth, 8},
		{"ring_max", map[string]any{"ring_size": 2, "ring_max": 6}, 6, 6},
		{"never", map[string]any{"ring_size": 2, "ring_max": 2}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster(t)
			slowPolicyWorker(t, cl, 3*time.Millisecond)
			actor := cl.start(t, actorworker.TypeName, 0)
			cfg := map[string]any{"sample_stream": "null"}
			maps.Copy(cfg, tt.cfg)
			cl.run(t, actor, cfg)
			waitFor(t, "an inference-bound note", func() bool {
				return strings.Contains(cl.status(t, actor).Note, "inference-bound")
			})
			waitFor(t, fmt.Sprintf("a ring of %d", tt.grow), func() bool {
				return statInt(t, cl.stats(t, actor), "ring_size") >= tt.grow
			})
			time.Sleep(2 * actorworker.RingGrowEvery) // room to grow past ring_max, were it wrong
			st := cl.stats(t, actor)
			if n, m := statInt(t, st, "ring_size"), statInt(t, st, "ring_max"); n > tt.ringMax || m != tt.ringMax {
				t.Errorf("ring_size %d, ring_max %d; want at most %d and %d", n, m, tt.ringMax, tt.ringMax)
			}
			// Every environment steps: a grown ring has more requests in flight.
			before := statInt(t, st, "env_steps")
			waitFor(t, "the ring's every environment to step", func() bool {
				return statInt(t, cl.stats(t, actor), "env_steps") >= before+4*tt.grow
			})
		})
	}
}

// slowPolicyWorker serves cl's trial's default policy in-process, answering
// each batch of requests after delay with zeros.
func slowPolicyWorker(t *testing.T, cl *cluster, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err := stream.NewInferenceServer(ctx, stream.InferenceServerOptions{Repo: cl.repo, Trial: testTrial, ObsDim: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		defer close(serving)
		defer srv.Close()
		var b stream.InferenceBatch
		var out api.Inference
		for ctx.Err() == nil {
			rows, err := srv.Poll(256, &b)
			if err != nil || rows == 0 {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			time.Sleep(delay)
			out.Actions.Resize(rows)
			out.LogProbs.Resize(rows)
			out.Values.Resize(rows)
			if err := srv.Respond(&b, &out); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-serving })
}
