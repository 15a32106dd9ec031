package actorworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/algo/dqn"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/duty"
	"github.com/distrl/distrl/internal/monoclock"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// TypeName is the worker type name ("actor/0", "actor/1", ...).
const TypeName = member.TypeActor

// Defaults of Config.
const (
	DefaultEnv          = env.CartPoleName
	DefaultRingSize     = 2
	DefaultPolicy       = "default"
	DefaultStream       = "default"
	DefaultMaxPollSteps = 16
	// DefaultSampleQueue is how many sample messages may wait for each
	// consumer. An on-policy trainer drops batches more than
	// max_staleness updates old, and with the stream's own default (64
	// messages of up to 256 KiB) MinAtar's PPO trainer dropped 60% of its
	// actors' steps as stale; with 1 (and the trainer's short receive
	// queue) it trains on 99% of them (docs/dataplane.md).
	DefaultSampleQueue = 1
	// AutoRingTime is when an actor with ring_slots unset (auto) steps its
	// ring as two slots rather than one: when stepping the whole ring
	// takes at least this long, a half of it is a good part of a round
	// trip to a policy worker on the same machine (150-250 us on the
	// 2-core development machine) that the other half's stepping hides.
	// Below it the second slot hides little and doubles the request
	// messages, each of which costs both processes CPU: CartPole with 8
	// or 64 environments (a ring in 10-100 us) ran 10-40% faster in one
	// slot; 2 actors of 256 (a ring in 300-400 us) ran faster in two.
	AutoRingTime = 200 * time.Microsecond
	// SampleFlushEvery is how long an actor gathers finished sample
	// batches before sending them as one message (sooner when a message's
	// worth is gathered, at once while draining). Each message costs the
	// trainer and both ZeroMQ I/O threads a wake-up: with a small ring,
	// flushing every turn sent a message per few dozen steps.
	SampleFlushEvery = 5 * time.Millisecond
	// NullStream as sample_stream discards every batch.
	NullStream = "null"
	// Inference modes.
	InferenceRemote = "remote"
	InferenceInline = "inline"
)

// Config is the configuration of the "actor" worker type (the kwargs of
// "configure"). Zero values mean the defaults.
type Config struct {
	Env       string         `msgpack:"env"`        // registered environment; default CartPole-v1
	EnvConfig map[string]any `msgpack:"env_config"` // passed to the environment's factory
	RingSize  int            `msgpack:"ring_size"`  // environments per actor; default 2
	Policy    string         `msgpack:"policy"`     // policy name; default "default" (without agents)
	// Inference is "remote" (a policy worker; the default) or "inline".
	Inference string `msgpack:"inference"`
	// InferenceTimeoutMs bounds a remote request; 0 means the stream's
	// default. A request that times out is posted again.
	InferenceTimeoutMs int `msgpack:"inference_timeout_ms"`
	// Hidden, Activation, Conv, SharedTrunk and Deterministic configure the
	// inline policy, as they do a policy worker's (see policy.Config).
	Hidden        []int          `msgpack:"hidden"`
	Activation    nn.Activation  `msgpack:"activation"`
	Conv          []nn.ConvLayer `msgpack:"conv"`
	SharedTrunk   bool           `msgpack:"shared_trunk"`
	Deterministic bool           `msgpack:"deterministic"`
	// SampleStream is the sample stream's name; "null" discards batches.
	// Default "default" (without agents).
	SampleStream string `msgpack:"sample_stream"`
	SampleSteps  int    `msgpack:"sample_steps"` // steps per batch; default 200
	// SampleQueue is how many sample messages may wait in the actor for
	// each consumer (the socket's send high-water mark); default
	// DefaultSampleQueue. What waits ages with every update of an
	// on-policy trainer, so the queue is short; a consumer with no
	// staleness bound (a sink) can take a deeper one.
	SampleQueue int `msgpack:"sample_queue"`
	// SpanEpisodes carries a batch on across the terminations in it: it
	// ends every sample_steps steps and at truncations, not at every
	// episode's end. Fewer, longer messages for a consumer that has no
	// staleness bound (a sink, a replay); an on-policy trainer's batches
	// then hold steps of more versions, dropped whole once the oldest is
	// stale (docs/dataplane.md, "Batches across episodes"). Agents that
	// play a pool cut at every episode's end regardless, so that one
	// version plays each of their batches.
	SpanEpisodes bool `msgpack:"span_episodes"`
	// VersionCuts ends a batch when an action comes from a newer policy
	// version than every step in it, so that a batch holds one version
	// and an on-policy trainer, which drops a batch whole once it is more
	// than max_staleness versions old, drops no newer step with it
	// (docs/dataplane.md, "Batches of one version"). Default true; batches
	// to a replay stream are never cut so (a replay keeps transitions of
	// any version, and a cut shortens n-step returns).
	VersionCuts *bool `msgpack:"version_cuts"`
	// MaxPollSteps bounds the targets one poll visits; default the larger
	// of the ring size and 16.
	MaxPollSteps int `msgpack:"max_poll_steps"`
	// RingSlots splits the ring, with remote inference, into that many
	// slots of consecutive targets, each stepped together and flushed as
	// its own request: while one slot waits for its actions the others
	// step (Sample Factory's double-buffered sampling). At most
	// ring_size. Unset (0), the actor chooses as it goes: two slots while
	// stepping the whole ring takes AutoRingTime or more, else one.
	// Inline inference steps the whole ring as one slot.
	RingSlots int `msgpack:"ring_slots"`
	// RingMax is the most environments the ring grows to while the actor
	// waits for actions most of the time and its consumers take all it
	// sends (see grow.go): 0 (auto) is AutoRingGrowth times ring_size
	// while every policy worker it reaches is on another node (no shared
	// memory), where the round trip is the network's, and ring_size
	// otherwise; ring_size itself: never grow.
	RingMax int `msgpack:"ring_max"`
	// pollStepsAuto: max_poll_steps was unset, so it follows a ring that
	// grows.
	pollStepsAuto bool
	// Seed seeds the environments (EnvSeed) and the inline policy; nil
	// means the worker's index.
	Seed *int64 `msgpack:"seed"`
	// ReplayStream, if set, sends the actor's steps into that replay
	// stream's table ReplayTable (default "default") as n-step
	// transitions with initial priorities (localreplay.Poster: Ape-X)
	// instead of a sample stream. Gamma (0.99) and NStep (3) shape the
	// returns.
	ReplayStream string  `msgpack:"replay_stream"`
	ReplayTable  string  `msgpack:"replay_table"`
	Gamma        float64 `msgpack:"gamma"`
	NStep        int     `msgpack:"n_step"`
	// Epsilon replaces each discrete action by a random one with that
	// probability (epsilon-greedy over a deterministic policy). ApexActors
	// N > 0 instead gives actor i Ape-X's epsilon 0.4^(1 + 7 i/(N-1)).
	Epsilon    float64 `msgpack:"epsilon"`
	ApexActors int     `msgpack:"apex_actors"`
	// MaxEnvSteps stops the actor after that many environment steps (over
	// all its environments): it finishes its partial batches once the
	// values they bootstrap from arrive, sends them, and completes. 0 means
	// unbounded.
	MaxEnvSteps int64 `msgpack:"max_env_steps"`
	// Agents maps the environment's agents to policies, each with its own
	// inference client, sample stream (or replay) and settings; the first
	// mapping that matches an agent takes it, and every agent must be
	// taken. Unset, every agent acts for Policy. With Agents, Policy,
	// SampleStream, ReplayStream and ReplayTable go in the mappings.
	Agents AgentMappings `msgpack:"agents"`
	// routes are the mappings resolved (parseConfig): Agents, or the one
	// mapping of every agent to the actor-level policy.
	routes []routeSpec
}

// parseConfig decodes and checks the kwargs of "configure". A bad
// configuration is a bad_arguments *rpc.Error, which leaves the worker as
// it was. It resolves the agents mappings against a throwaway environment's
// agents and builds the inline policies, so that a mapping that leaves an
// agent out, or a bad policy configuration, is caught here too.
func parseConfig(args rpc.Args, index int) (Config, error) {
	var cfg Config
	if err := worker.DecodeConfig(args, "actor config", &cfg); err != nil {
		return cfg, err
	}
	if len(cfg.Agents) > 0 {
		// No actor-level defaults under mappings: a policy or stream given
		// twice would leave the reader guessing which one holds.
		for _, k := range []struct{ key, val string }{
			{"policy", cfg.Policy}, {"sample_stream", cfg.SampleStream},
			{"replay_stream", cfg.ReplayStream}, {"replay_table", cfg.ReplayTable},
		} {
			if k.val != "" {
				return cfg, badConfig("%s %q given with agents: put it in each agents mapping", k.key, k.val)
			}
		}
	} else {
		cfg.Policy = cmp.Or(cfg.Policy, DefaultPolicy)
		cfg.SampleStream = cmp.Or(cfg.SampleStream, DefaultStream)
	}
	cfg.Env = cmp.Or(cfg.Env, DefaultEnv)
	cfg.Inference = cmp.Or(cfg.Inference, InferenceRemote)
	cfg.RingSize = cmp.Or(cfg.RingSize, DefaultRingSize)
	cfg.SampleSteps = cmp.Or(cfg.SampleSteps, DefaultSampleSteps)
	cfg.SampleQueue = cmp.Or(cfg.SampleQueue, DefaultSampleQueue)
	if cfg.VersionCuts == nil {
		cfg.VersionCuts = new(true)
	}
	cfg.pollStepsAuto = cfg.MaxPollSteps == 0
	cfg.MaxPollSteps = cmp.Or(cfg.MaxPollSteps, max(DefaultMaxPollSteps, cfg.RingSize))
	cfg.Gamma = cmp.Or(cfg.Gamma, 0.99)
	cfg.NStep = cmp.Or(cfg.NStep, 3)
	if cfg.ApexActors > 0 {
		cfg.Epsilon = dqn.ApeXEpsilon(index, cfg.ApexActors)
	}
	if cfg.Seed == nil {
		s := int64(index)
		cfg.Seed = &s
	}
	switch {
	case cfg.Inference != InferenceRemote && cfg.Inference != InferenceInline:
		return cfg, badConfig("inference %q, want %q or %q", cfg.Inference, InferenceRemote, InferenceInline)
	case cfg.RingSize < 1:
		return cfg, badConfig("ring_size %d, want >= 1", cfg.RingSize)
	case cfg.SampleSteps < 1:
		return cfg, badConfig("sample_steps %d, want >= 1", cfg.SampleSteps)
	case cfg.SampleQueue < 1:
		return cfg, badConfig("sample_queue %d, want >= 1", cfg.SampleQueue)
	case cfg.MaxPollSteps < 1:
		return cfg, badConfig("max_poll_steps %d, want >= 1", cfg.MaxPollSteps)
	case cfg.RingMax != 0 && cfg.RingMax < cfg.RingSize:
		return cfg, badConfig("ring_max %d, want ring_size (%d) or more, or 0 to let the actor choose", cfg.RingMax, cfg.RingSize)
	case cfg.RingSlots < 0 || cfg.RingSlots > cfg.RingSize:
		return cfg, badConfig("ring_slots %d, want 1 to ring_size (%d), or 0 to let the actor choose", cfg.RingSlots, cfg.RingSize)
	case cfg.MaxEnvSteps < 0:
		return cfg, badConfig("max_env_steps %d, want >= 0", cfg.MaxEnvSteps)
	case !(cfg.Epsilon >= 0 && cfg.Epsilon <= 1) || cfg.ApexActors < 0:
		return cfg, badConfig("epsilon %v, apex_actors %d: want epsilon in [0, 1] and apex_actors >= 0", cfg.Epsilon, cfg.ApexActors)
	case cfg.ApexActors > 0 && index >= cfg.ApexActors:
		return cfg, badConfig("apex_actors %d, but this actor's index is %d", cfg.ApexActors, index)
	case !(cfg.Gamma >= 0 && cfg.Gamma <= 1) || cfg.NStep < 0:
		return cfg, badConfig("gamma %v, n_step %d: want gamma in [0, 1], n_step >= 0", cfg.Gamma, cfg.NStep)
	case cfg.InferenceTimeoutMs < 0:
		return cfg, badConfig("inference_timeout_ms %d, want >= 0", cfg.InferenceTimeoutMs)
	}
	// A throwaway environment checks the name and env_config now, while
	// the previous configuration is still intact, and names the agents the
	// mappings must cover.
	e, err := api.NewEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return cfg, badConfig("%v", err)
	}
	ids := slices.Clone(e.Agents())
	_ = e.Close()
	cfg.routes, err = routeSpecs(cfg, ids)
	return cfg, err
}

func badConfig(format string, args ...any) error {
	return rpc.Errorf(rpc.ErrTypeBadArguments, "actor config: "+format, args...)
}

// Worker is the implementation of the "actor" worker type.
type Worker struct {
	info worker.Info
	log  *slog.Logger

	cfg Config
	// routes are the mappings of agents to policies (one without the
	// agents key), agentRoute each agent's, by its index in the
	// environment. clients are the policies' inference clients, one per
	// policy, and producers the streams', one per stream: what the worker
	// polls, flushes, waits on and closes.
	routes      []*route
	agentRoute  []*route
	clients     []stream.InferenceClient
	producers   []stream.SamplePoster
	policyStats map[string]*policyStat
	batch       api.EnvBatch // the ring's environments
	ring        *EnvRing

	// The environment calls of one turn of the ring, reused.
	resetCalls   []api.EnvReset
	resetTargets []*EnvTarget
	stepCalls    []api.EnvStep
	stepTargets  []*EnvTarget

	started  bool // the environments were reset
	draining bool // max_env_steps reached
	begin    time.Time

	// stepCost is a moving average of the time a turn takes per
	// environment it steps, and slots the slots the ring is stepped in
	// now (see ringSlots).
	stepCost float64 // ns
	slots    int
	// samplesFlushed is when gathered sample batches were last sent.
	samplesFlushed time.Time

	recent     [member.ReturnWindow]api.EpisodeStat
	recentNext int
	recentLen  int

	// metrics records the counters of Stats in Prometheus. The targets
	// count per environment step, too often to record there, so each
	// poll adds what the targets counted since recorded, the totals the
	// last poll recorded.
	metrics  *telemetry.Actor
	recorded TargetStats

	// pressure is the share of the last minute the actor held batches its
	// consumers refused, waiting the share it had nothing to step but
	// waited for actions (Note); recordedAt is when the last poll ended,
	// polledAt when this one began, awaiting whether the last ended with
	// every target waiting for its actions (its last turn stepped
	// nothing, and no batch was held back), backpressured the seconds
	// held in all.
	pressure      *duty.Window
	waiting       *duty.Window
	pressureBound duty.Latch // the Note says consumer-bound
	waitingBound  duty.Latch // the Note says inference-bound
	recordedAt    time.Time
	growth        growth
	polledAt      time.Time
	awaiting      bool
	lastAwaiting  bool
	backpressured time.Duration
}

// BoundShare is the share of the last minute an actor must have been
// back-pressured, or waiting for actions, for its Note to call it bound by
// its consumers, or by inference.
const BoundShare = 0.5

// ClearShare is the share below which a bound the Note gave goes: a share
// that hovers at BoundShare does not make the note come and go.
const ClearShare = 0.4

// bound is a bound the Note gives: set at BoundShare, cleared below
// ClearShare.
func bound() duty.Latch { return duty.Latch{On: BoundShare, Off: ClearShare} }

var (
	_ worker.Impl        = (*Worker)(nil)
	_ worker.SocketOwner = (*Worker)(nil)
	_ worker.FdWaiter    = (*Worker)(nil)
	_ worker.Reporter    = (*Worker)(nil)
)

// New is the worker.Factory of the actor type.
func New(info worker.Info) (worker.Impl, error) {
	return &Worker{info: info, log: info.Log(), metrics: info.Telemetry().Actor(),
		pressure: newMinute(), waiting: newMinute(), pressureBound: bound(), waitingBound: bound()}, nil
}

// Type is the actor worker type, for a worker.Registry.
func Type() worker.Type {
	return worker.Type{Name: TypeName, New: New, Spec: member.Spec{Check: CheckConfig}}
}

// CheckConfig checks actor index's configure kwargs as Configure does,
// opening nothing but a throwaway environment (worker.Type.Check).
func CheckConfig(args rpc.Args, index int) error {
	_, err := parseConfig(args, index)
	return err
}

// Configure builds the environments, the inference client and the sample
// producer. A worker configured again drops what it had; a bad
// configuration is rejected before that, leaving the worker as it was.
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	cfg, err := parseConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		w.log.Warn("actor: releasing the previous configuration", "err", err)
	}
	if err := w.build(ctx, cfg); err != nil {
		_ = w.Close()
		return fmt.Errorf("actor: configure: %w", err)
	}
	w.cfg = cfg
	w.log.Info("actor configured", "env", cfg.Env, "ring_size", cfg.RingSize, "inference", cfg.Inference,
		"agents", w.mappings(cfg), "seed", *cfg.Seed)
	return nil
}

// build creates everything cfg describes: the environments, and a route
// for each of cfg.routes, with one inference client per policy and one
// producer per stream. On error the caller closes what was made.
func (w *Worker) build(ctx context.Context, cfg Config) error {
	batch, err := api.NewEnvBatch(ctx, cfg.Env, cfg.EnvConfig, cfg.RingSize, w.log)
	if err != nil {
		return err
	}
	w.batch = batch
	obsDim := batch.ObservationSpace().Size()

	clients := map[string]stream.InferenceClient{}
	producers := map[string]stream.SamplePoster{}
	w.policyStats = map[string]*policyStat{}
	for i := range cfg.routes {
		spec := &cfg.routes[i]
		client, ok := clients[spec.policy]
		if !ok {
			if client, err = w.newClient(ctx, cfg, spec, obsDim); err != nil {
				return err
			}
			clients[spec.policy] = client
			w.clients = append(w.clients, client)
			w.policyStats[spec.policy] = &policyStat{}
		}
		r := &route{policy: spec.policy, client: client, sampleSteps: spec.sampleSteps, versionCuts: spec.versionCuts}
		r.pool, _ = client.(*poolInference)
		if spec.epsilon > 0 {
			as := batch.ActionSpace()
			if as.Kind != api.Discrete {
				return fmt.Errorf("%sepsilon %v needs discrete actions, the environment's are %v", spec.where, spec.epsilon, as.Kind)
			}
			// Exploration wraps the policy's client for this mapping's
			// agents only; the worker polls and flushes the client itself.
			r.explore = &exploring{InferenceClient: client, eps: spec.epsilon, nActions: as.N,
				rng: rand.New(rand.NewPCG(uint64(spec.seed), 0xe95))}
			r.client = r.explore
		}
		key := spec.streamKey()
		if r.producer = producers[key]; r.producer == nil {
			if r.producer, err = w.newProducer(ctx, cfg, spec); err != nil {
				return err
			}
			producers[key] = r.producer
			w.producers = append(w.producers, r.producer)
		}
		w.routes = append(w.routes, r)
	}
	// The batch's agents are the throwaway environment's that parseConfig
	// checked the mappings against (unless an environment changed its
	// agents in between, which this refuses).
	ids := batch.Agents()
	assign, err := assignAgents(cfg.routes, ids)
	if err != nil {
		return err
	}
	w.agentRoute = make([]*route, len(ids))
	for i, k := range assign {
		w.agentRoute[i] = w.routes[k]
		w.routes[k].agents = append(w.routes[k].agents, ids[i])
	}

	targets, err := w.newTargets(batch, cfg, 0)
	if err != nil {
		return err
	}
	w.ring = NewEnvRing(targets...)
	return nil
}

// newClient is the inference client of spec's policy: its inline network,
// or a remote client of its policy workers.
func (w *Worker) newClient(ctx context.Context, cfg Config, spec *routeSpec, obsDim int) (stream.InferenceClient, error) {
	if spec.pool != nil {
		r, err := paramstream.NewKeptReader(ctx, w.info.Repo, w.info.Trial, spec.pool.Policy)
		if err != nil {
			return nil, err
		}
		p, err := newPoolInference(ctx, r, *spec.pool, spec.seed, obsDim, func() (*policy.ActorCritic, error) {
			return inlinePolicy(cfg, spec.seed, spec.deterministic)
		})
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		return p, nil
	}
	if spec.inline != nil {
		return stream.NewInlineInferenceClient(spec.inline, obsDim), nil
	}
	c, err := stream.NewRemoteInferenceClient(ctx, stream.RemoteInferenceOptions{
		Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Policy: spec.policy, ObsDim: obsDim,
		Timeout: time.Duration(cfg.InferenceTimeoutMs) * time.Millisecond, Logger: w.log,
	})
	if err != nil {
		return nil, fmt.Errorf("inference for policy %q: %w", spec.policy, err)
	}
	return c, nil
}

// newProducer is the producer of spec's stream: a replay poster, the null
// stream, or a sample stream.
func (w *Worker) newProducer(ctx context.Context, cfg Config, spec *routeSpec) (stream.SamplePoster, error) {
	switch {
	case spec.replayStream != "":
		p, err := localreplay.NewPoster(ctx, localreplay.PosterOptions{Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial,
			Stream: spec.replayStream, Table: spec.replayTable, Gamma: cfg.Gamma, NStep: cfg.NStep})
		if err != nil {
			return nil, fmt.Errorf("replay stream %q: %w", spec.replayStream, err)
		}
		return p, nil
	case spec.sampleStream == NullStream:
		return &stream.NullSampleProducer{}, nil
	}
	p, err := stream.NewSampleProducer(ctx, stream.SampleProducerOptions{
		Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Stream: spec.sampleStream, Logger: w.log,
		SendHWM: cfg.SampleQueue,
		Gather:  true, // a turn's batches go as one message, at the turn's Flush
	})
	if err != nil {
		return nil, fmt.Errorf("sample stream %q: %w", spec.sampleStream, err)
	}
	return p, nil
}

// newTargets makes targets of batch's environments from first on, each
// target index its environment's, each agent on its route.
func (w *Worker) newTargets(batch api.EnvBatch, cfg Config, first int) ([]*EnvTarget, error) {
	targets := make([]*EnvTarget, batch.Len()-first)
	for i := range targets {
		t, err := NewBatchTarget(batch, first+i, first+i, TargetConfig{
			ActorID: w.info.Name, SampleSteps: cfg.SampleSteps, Seed: *cfg.Seed,
			Route: func(agent int, _ string) AgentRoute {
				r := w.agentRoute[agent]
				client := r.client
				if r.pool != nil {
					client = r.pool.slot() // each agent draws its own version per episode
				}
				return AgentRoute{Client: client, Producer: r.producer, Policy: r.policy, SampleSteps: r.sampleSteps,
					SpanEpisodes: cfg.SpanEpisodes && r.pool == nil, VersionCuts: r.versionCuts}
			},
			OnEpisode: w.addEpisode, OnPolicyEpisode: w.addPolicyEpisode,
		})
		if err != nil {
			return nil, err
		}
		targets[i] = t
	}
	return targets, nil
}

// pollInference takes in the replies of every policy's client.
func (w *Worker) pollInference() error {
	for _, c := range w.clients {
		if err := c.Poll(); err != nil {
			return fmt.Errorf("actor: inference poll: %w", err)
		}
	}
	return nil
}

// flushInference sends (remote) or answers (inline) the requests posted to
// every policy's client.
func (w *Worker) flushInference(ctx context.Context) error {
	for _, c := range w.clients {
		if err := c.Flush(ctx); err != nil {
			return fmt.Errorf("actor: inference flush: %w", err)
		}
	}
	return nil
}

// remoteInference reports whether a policy is served by policy workers,
// whose replies the actor waits for: then the ring is stepped in slots.
func (w *Worker) remoteInference() bool {
	for _, c := range w.clients {
		if c.Socket() != nil {
			return true
		}
	}
	return false
}

// Poll takes in the replies that arrived and steps the targets that are
// ready (up to max_poll_steps, in ring order) a slot at a time, flushing
// the requests each slot posted as one message, so that several requests
// are in flight while the next slot steps. The environment calls of one
// slot travel together (api.EnvBatch.Run), so that a Python environment
// host gets one message per slot. Samples in the result are agent steps;
// a poll that did nothing is idle, so the worker sleeps on the inference
// socket until replies arrive.
func (w *Worker) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.ring == nil {
		return worker.PollResult{}, errors.New("actor: polled before configure")
	}
	// Deferred, so that a poll that fails half way still records the
	// steps it took: Stats counts them.
	w.polledAt = monoclock.Now()
	w.awaiting = false
	defer w.record()
	if !w.started {
		if err := w.startEpisodes(ctx); err != nil {
			return worker.PollResult{}, err
		}
	}
	if err := w.maybeGrow(ctx, w.polledAt); err != nil {
		return worker.PollResult{}, err
	}
	if err := w.pollInference(); err != nil {
		return worker.PollResult{}, err
	}
	// Batches gathered or refused by a full queue, the replay's replies.
	w.flushSamples(w.polledAt)
	sentBefore := w.totals().BatchesSent
	// Retry batches refused with back-pressure first: their targets cannot
	// step until they are out.
	for _, t := range w.ring.Targets() {
		if _, err := t.Send(); err != nil {
			return worker.PollResult{}, err
		}
	}
	var samples int64
	budget := w.cfg.MaxPollSteps
	slot := w.ring.Len()
	if w.remoteInference() {
		slots := w.ringSlots()
		slot = (w.ring.Len() + slots - 1) / slots
	}
	for budget > 0 {
		began := monoclock.Now()
		n, steps, visits, err := w.turn(ctx, min(budget, slot))
		if err != nil {
			return worker.PollResult{}, err
		}
		took := time.Since(began) // the monotonic clock only: cheaper than time.Now
		w.noteTurn(took, steps)
		samples += n
		budget -= visits
		if err := w.flushInference(ctx); err != nil {
			return worker.PollResult{}, err
		}
		w.flushSamples(began.Add(took))
		// The next slot steps while this one's request is out; inline
		// results are ready as soon as Flush returns, so an inline actor
		// goes round again. A turn that stepped nothing ends the poll:
		// the worker waits on the inference socket for replies.
		if n == 0 {
			w.awaiting = steps == 0
			break
		}
	}
	res := worker.PollResult{Samples: samples, Batches: w.totals().BatchesSent - sentBefore}
	res.Done = w.draining && w.allDone()
	return res, nil
}

// ringSlots is the number of slots to step the ring in: ring_slots, or,
// when it is unset, 2 while the ring takes AutoRingTime or more to step
// and 1 otherwise (back to 1 only below 3/4 of it, so that a cost near
// the threshold does not flip the choice every poll).
func (w *Worker) ringSlots() int {
	if w.cfg.RingSlots > 0 {
		w.slots = w.cfg.RingSlots
		return w.slots
	}
	ring := time.Duration(w.stepCost * float64(w.ring.Len()))
	switch {
	case w.slots < 2 && ring >= AutoRingTime:
		w.slots = 2
	case w.slots >= 2 && ring < AutoRingTime*3/4:
		w.slots = 1
	}
	return min(max(w.slots, 1), w.ring.Len())
}

// noteTurn adds a turn that took d to step `steps` environments to the
// moving average of the cost per step.
func (w *Worker) noteTurn(d time.Duration, steps int) {
	if steps == 0 {
		return
	}
	c := float64(d) / float64(steps)
	if w.stepCost == 0 {
		w.stepCost = c
		return
	}
	w.stepCost += (c - w.stepCost) / 16
}

// turn visits up to budget targets (at most the ring's length) from the
// current one, prepares those that are ready, and runs their environment
// calls as one batch; the resets of episodes that terminated in it follow
// as a second. It returns the agent steps recorded, the environments
// stepped and the targets visited.
func (w *Worker) turn(ctx context.Context, budget int) (samples int64, steps, visits int, err error) {
	w.resetCalls, w.resetTargets = w.resetCalls[:0], w.resetTargets[:0]
	w.stepCalls, w.stepTargets = w.stepCalls[:0], w.stepTargets[:0]
	planned := int64(0)
	for ; visits < budget && visits < w.ring.Len(); visits++ {
		t := w.ring.Current()
		w.ring.Rotate()
		if !t.ReadyToStep() {
			continue
		}
		call, err := t.prepare()
		if err != nil {
			return 0, 0, visits, err
		}
		switch call {
		case callReset:
			w.resetCalls, w.resetTargets = append(w.resetCalls, t.resetCall()), append(w.resetTargets, t)
		case callStep:
			w.stepCalls, w.stepTargets = append(w.stepCalls, t.stepCall()), append(w.stepTargets, t)
			planned++
			if !w.draining && w.cfg.MaxEnvSteps > 0 && w.totals().EnvSteps+planned >= w.cfg.MaxEnvSteps {
				w.drain() // the steps prepared still run; no more are
			}
		}
	}
	if err := w.runCalls(ctx); err != nil {
		return 0, 0, visits, err
	}
	for i, t := range w.resetTargets {
		if err := t.completeReset(w.resetCalls[i]); err != nil {
			return 0, 0, visits, err
		}
	}
	w.resetCalls, w.resetTargets = w.resetCalls[:0], w.resetTargets[:0]
	for i, t := range w.stepTargets {
		n, err := t.completeStep(w.stepCalls[i].Result)
		if err != nil {
			return samples, 0, visits, err
		}
		samples += int64(n)
		if t.resetDue {
			w.resetCalls, w.resetTargets = append(w.resetCalls, t.resetCall()), append(w.resetTargets, t)
		}
	}
	if len(w.resetTargets) == 0 {
		return samples, int(planned), visits, nil
	}
	w.stepCalls, w.stepTargets = w.stepCalls[:0], w.stepTargets[:0]
	if err := w.runCalls(ctx); err != nil {
		return samples, 0, visits, err
	}
	for i, t := range w.resetTargets {
		if err := t.completeReset(w.resetCalls[i]); err != nil {
			return samples, 0, visits, err
		}
	}
	return samples, int(planned), visits, nil
}

// runCalls runs the pending resets and steps as one batch.
func (w *Worker) runCalls(ctx context.Context) error {
	if len(w.resetCalls)+len(w.stepCalls) == 0 {
		return nil
	}
	if err := w.batch.Run(ctx, w.resetCalls, w.stepCalls); err != nil {
		return fmt.Errorf("actor: environments: %w", err)
	}
	return nil
}

// startEpisodes resets every environment, in one batch, and sends the
// first requests, so that (inline) the first poll can step already.
func (w *Worker) startEpisodes(ctx context.Context) error {
	if err := w.startTargets(ctx, w.ring.Targets()); err != nil {
		return err
	}
	w.started, w.begin = true, time.Now()
	w.growth.from = w.begin
	return nil
}

// startTargets resets targets, in one batch, and sends their first
// requests.
func (w *Worker) startTargets(ctx context.Context, targets []*EnvTarget) error {
	w.resetCalls, w.resetTargets = w.resetCalls[:0], w.resetTargets[:0]
	w.stepCalls, w.stepTargets = w.stepCalls[:0], w.stepTargets[:0]
	for _, t := range targets {
		t.resetDue, t.resetSeed = true, EnvSeed(*w.cfg.Seed, t.index, 0)
		w.resetCalls, w.resetTargets = append(w.resetCalls, t.resetCall()), append(w.resetTargets, t)
	}
	if err := w.runCalls(ctx); err != nil {
		return err
	}
	for i, t := range w.resetTargets {
		if err := t.completeReset(w.resetCalls[i]); err != nil {
			return err
		}
	}
	return w.flushInference(ctx)
}

// flushSamples sends the gathered sample batches once SampleFlushEvery has
// passed since the last time, or at once while draining. A replay poster
// is flushed every time: its Flush also takes in the replay's
// acknowledgements, which free its outbox (an actor whose outbox is full
// cannot step until they are in).
func (w *Worker) flushSamples(now time.Time) {
	due := w.draining || now.Sub(w.samplesFlushed) >= SampleFlushEvery
	if due {
		w.samplesFlushed = now
	}
	for _, p := range w.producers {
		if _, replay := p.(*localreplay.Poster); replay || due {
			p.Flush()
		}
	}
}

func (w *Worker) drain() {
	w.draining = true
	w.log.Info("actor: max_env_steps reached; sending what is left", "max_env_steps", w.cfg.MaxEnvSteps)
	for _, t := range w.ring.Targets() {
		t.Drain()
	}
}

// allDone says whether every target has sent its last batch and the
// producer has let go of all of them: a batch a full queue keeps gathered
// would be lost when the finished worker closes the producer.
func (w *Worker) allDone() bool {
	for _, t := range w.ring.Targets() {
		if !t.AllDone() {
			return false
		}
	}
	for _, p := range w.producers {
		if p.Buffered() != 0 {
			return false
		}
	}
	return true
}

// totals is the targets' counters summed; Version is the newest.
func (w *Worker) totals() TargetStats {
	if w.ring == nil {
		return TargetStats{}
	}
	return w.ring.Stats()
}

// record adds to the Prometheus counters what the targets counted since
// the last call, and sets the return gauge if episodes ended.
//
// It also accounts the time since the last poll ended as back-pressured
// when this poll found a batch refused (a back-pressured actor retries
// its refused batches at every poll, so each poll of such a wait counts
// one refusal at least); and the time between the last poll and this
// one as waiting for actions when the last ended with every target
// waiting for them (a reply wakes the actor, whose poll then steps: the
// sleep before it is the wait).
func (w *Worker) record() {
	s, last := w.totals(), w.recorded
	w.recorded = s
	now := monoclock.Now()
	if !w.recordedAt.IsZero() {
		d, held := now.Sub(w.recordedAt), s.Backpressure > last.Backpressure
		w.pressure.Add(now, d, held)
		gap := max(w.polledAt.Sub(w.recordedAt), 0)
		waited := w.lastAwaiting && !held && !w.draining
		w.waiting.Add(now, gap, waited)
		w.waiting.Add(now, d-gap, false)
		if waited {
			w.growth.waited += gap
		}
		if held {
			w.growth.held = true
			w.backpressured += d
			w.metrics.Backpressured.Add(d.Seconds())
		}
	}
	w.recordedAt, w.lastAwaiting = now, w.awaiting
	if d := s.EnvSteps - last.EnvSteps; d > 0 {
		w.metrics.EnvSteps.Add(float64(d))
	}
	if d := s.InferenceFailures - last.InferenceFailures; d > 0 {
		w.metrics.InferenceFailures.Add(float64(d))
	}
	if d := s.Episodes - last.Episodes; d > 0 {
		w.metrics.Episodes.Add(float64(d))
		ret, _ := w.recentMeans()
		w.metrics.Return.Set(ret)
	}
}

func (w *Worker) addEpisode(e api.EpisodeStat) {
	w.recent[w.recentNext] = e
	w.recentNext = (w.recentNext + 1) % member.ReturnWindow
	w.recentLen = min(w.recentLen+1, member.ReturnWindow)
}

// recentMeans are the mean return and length of the last
// member.ReturnWindow episodes (0 before the first).
func (w *Worker) recentMeans() (ret, length float64) {
	if w.recentLen == 0 {
		return 0, 0
	}
	for _, e := range w.recent[:w.recentLen] {
		ret += float64(e.Return)
		length += float64(e.Length)
	}
	return ret / float64(w.recentLen), length / float64(w.recentLen)
}

// Stats reports the actor's counters, totals over its policies. mean_return
// and mean_length are over the last 20 finished episodes as the first
// agent of each environment saw them (the same for every agent of a
// shared-reward environment); steps_per_s is environment steps per second
// since the first poll. An actor whose agents act for several policies
// adds policies: per policy, its agents' agent_steps and batches_sent, the
// episodes they took part in, and mean_return, over its last 20 episodes,
// an episode's return being the mean of its agents' returns in it.
func (w *Worker) Stats() map[string]any {
	s := w.totals()
	ret, length := w.recentMeans()
	var rate float64
	if w.started {
		if d := time.Since(w.begin).Seconds(); d > 0 {
			rate = float64(s.EnvSteps) / d
		}
	}
	ring := 0
	if w.ring != nil {
		ring = w.ring.Len()
	}
	out := map[string]any{
		member.StatEnvSteps:   s.EnvSteps,
		"agent_steps":         s.AgentSteps,
		member.StatEpisodes:   s.Episodes,
		member.StatMeanReturn: ret,
		"mean_length":         length,
		"batches_sent":        s.BatchesSent,
		"steps_per_s":         rate,
		"inference_failures":  s.InferenceFailures,
		"backpressure":        s.Backpressure,
		"backpressured_s":     w.backpressured.Seconds(),
		"backpressured_pct":   share(w.pressure) * 100,
		"inference_wait_pct":  share(w.waiting) * 100,
		"ring_size":           ring,
		"ring_slots":          max(w.slots, 1), // inline: the whole ring
		"ring_max":            w.ringMax(),
		"ring_step_us":        w.stepCost * float64(ring) / 1e3,
		"version_last":        s.Version,
	}
	if cs, ok := w.inferenceStats(); ok {
		out["inference_messages"], out["inference_bytes"] = cs.Messages, cs.Bytes
		out["inference_rtt_us"] = float64(cs.RoundTrip) / 1e3
		out["inference_shm_messages"] = cs.SharedMemory
		out["inference_local_messages"] = cs.SameProcess
	}
	// Over several mappings: epsilon is the first exploring one's, the
	// counts are totals.
	var random int64
	for _, r := range w.routes {
		if r.explore == nil {
			continue
		}
		if _, ok := out["epsilon"]; !ok {
			out["epsilon"] = r.explore.eps
		}
		random += r.explore.random
		out["random_actions"] = random
	}
	var messages int64
	for _, p := range w.producers {
		if p, ok := p.(*stream.SampleProducer); ok {
			messages += p.Stats().Messages
			out["sample_messages"] = messages
		}
	}
	if replays := w.replays(); len(replays) > 0 {
		var st localreplay.PosterStats
		for _, r := range replays {
			s := r.Stats()
			st.Inserted, st.Dropped, st.Failed, st.Outbox = st.Inserted+s.Inserted, st.Dropped+s.Dropped, st.Failed+s.Failed, st.Outbox+s.Outbox
		}
		out["replay_inserted"], out["replay_dropped"], out["replay_failed"], out["replay_outbox"] = st.Inserted, st.Dropped, st.Failed, st.Outbox
	}
	if len(w.policyStats) > 1 {
		out["policies"] = w.policiesStat()
	}
	if b, ok := w.batch.(infoReporter); ok {
		for k, v := range b.InfoMeans() {
			out[InfoStatPrefix+k] = v
		}
	}
	return out
}

// InfoStatPrefix prefixes the statistics that are the environments'
// numeric info values (pyenv.Host.InfoMeans).
const InfoStatPrefix = "info_"

// infoReporter is an environment batch that reports the mean of each
// numeric info key over its recent steps.
type infoReporter interface {
	InfoMeans() map[string]float64
}

// Sockets are the policies' inference clients' sockets, so an idle actor
// wakes as soon as a reply arrives. Inline inference has none.
func (w *Worker) Sockets() []*zmq.Socket {
	var socks []*zmq.Socket
	for _, c := range w.clients {
		if s := c.Socket(); s != nil {
			socks = append(socks, s)
		}
	}
	return socks
}

// WaitFds are the inference clients' shared-memory doorbells, so an idle
// actor also wakes when a policy worker on this node replies
// (worker.FdWaiter).
func (w *Worker) WaitFds() []int {
	var fds []int
	for _, c := range w.clients {
		if c, ok := c.(worker.FdWaiter); ok {
			fds = append(fds, c.WaitFds()...)
		}
	}
	return fds
}

// PrepareWait tells same-node policy workers the actor is about to sleep;
// false when replies are already waiting. Every client is told, even once
// one has replies: the loop may still sleep on the others' doorbells.
func (w *Worker) PrepareWait() bool {
	sleep := true
	for _, c := range w.clients {
		if c, ok := c.(worker.FdWaiter); ok {
			sleep = c.PrepareWait() && sleep
		}
	}
	return sleep
}

// InputReady reports whether a reply waits in shared memory, so that the
// loop finds it without sleeping (worker.MemoryWaiter).
func (w *Worker) InputReady() (ready, peers bool) {
	for _, c := range w.clients {
		if c, ok := c.(worker.MemoryWaiter); ok {
			r, p := c.InputReady()
			ready, peers = ready || r, peers || p
		}
	}
	return ready, peers
}

// Warning merges the inference clients' and the sample producers'
// warnings (each names its policy or stream): an actor whose policy worker
// or trainer is missing keeps retrying, and says so.
func (w *Worker) Warning() string {
	var msgs []string
	for _, c := range w.clients {
		if m := c.Warning(); m != "" {
			msgs = append(msgs, "inference: "+m)
		}
	}
	for _, p := range w.producers {
		if m := p.Warning(); m != "" {
			msgs = append(msgs, "samples: "+m)
		}
	}
	return strings.Join(msgs, "; ")
}

// Note says what bounds the actor when one thing held it for BoundShare
// of the last minute or more: its consumers (the trainer of an on-policy
// trial, the replay's rate limit of an Ape-X one), the normal state of a
// trial whose learner is its slowest part; or inference, when it waited
// for actions (a busy policy worker, or a round trip longer than stepping
// the ring: across nodes, a larger ring would keep it busy). Neither is a
// fault.
func (w *Worker) Note() string {
	if w.ring == nil {
		return ""
	}
	var notes []string
	if sh := share(w.pressure); w.pressureBound.At(sh) {
		bound := "consumer-bound"
		if len(w.replays()) == len(w.producers) {
			bound = "replay-bound"
		}
		notes = append(notes, fmt.Sprintf("%s: back-pressured %.0f%% of the last minute", bound, sh*100))
	}
	if sh := share(w.waiting); w.waitingBound.At(sh) {
		cs, _ := w.inferenceStats()
		rtt := cs.RoundTrip
		ring := time.Duration(w.stepCost * float64(w.ring.Len()))
		notes = append(notes, fmt.Sprintf("inference-bound: waited for actions %.0f%% of the last minute (round trip %v, stepping the ring %v)",
			sh*100, rtt.Round(time.Microsecond), ring.Round(time.Microsecond)))
	}
	return strings.Join(notes, "; ")
}

// newMinute is a window of the last minute in 5 s buckets.
func newMinute() *duty.Window { return duty.New(time.Minute, 12) }

// share is a window's share of the last minute; 0 until it has recorded
// a second.
func share(d *duty.Window) float64 {
	sh, recorded := d.Share(time.Now())
	if recorded < time.Second {
		return 0
	}
	return sh
}

// Close releases the environments and both streams. The worker can be
// configured again afterwards.
func (w *Worker) Close() error {
	var errs []error
	if w.batch != nil {
		errs = append(errs, w.batch.Close())
	}
	for _, c := range w.clients {
		errs = append(errs, c.Close())
	}
	for _, p := range w.producers {
		errs = append(errs, p.Close())
	}
	w.batch, w.ring, w.clients, w.producers = nil, nil, nil, nil
	w.routes, w.agentRoute, w.policyStats = nil, nil, nil
	w.started, w.draining = false, false
	w.stepCost, w.slots = 0, 0
	w.recentLen, w.recentNext = 0, 0
	// The targets' counts start over with the next configuration; every
	// poll recorded what they had counted.
	w.recorded, w.recordedAt = TargetStats{}, time.Time{}
	w.pressure, w.waiting = newMinute(), newMinute()
	w.pressureBound.Reset()
	w.waitingBound.Reset()
	return errors.Join(errs...)
}
