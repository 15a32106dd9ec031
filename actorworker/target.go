package actorworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/stream"
)

// DefaultSampleSteps is the number of steps per sample batch, unless an
// episode ends first.
const DefaultSampleSteps = 200

// EnvSeed is the seed of episode episode of ring target target of an actor
// whose seed is seed. The multipliers are primes, so different actors,
// targets and episodes get different seeds for any realistic counts, and a
// run can be replayed from its configuration.
func EnvSeed(seed int64, target, episode int) int64 {
	return seed*1000003 + int64(target)*7919 + int64(episode)
}

// TargetConfig configures an EnvTarget.
type TargetConfig struct {
	// Client answers every agent's inference requests, unless Route says
	// otherwise.
	Client stream.InferenceClient
	// Producer sends every agent's sample batches, unless Route says
	// otherwise.
	Producer stream.SamplePoster
	// Policy and ActorID label the batches (Policy unless Route says
	// otherwise).
	Policy, ActorID string
	// SampleSteps is the length of a batch cut mid-episode; 0 means
	// DefaultSampleSteps.
	SampleSteps int
	// SpanEpisodes carries batches on across terminations, and
	// VersionCuts ends them at a newer policy version (AgentRoute), unless
	// Route says otherwise.
	SpanEpisodes, VersionCuts bool
	// Route, if set, gives each agent (by its index in the environment's
	// agent list, and its id) the policy it acts for: its own client,
	// producer, policy label and batch length, in place of Client,
	// Producer, Policy and SampleSteps (a zero SampleSteps in the route
	// means SampleSteps).
	Route func(agent int, id string) AgentRoute
	// Seed is the actor's seed, from which episode seeds derive (EnvSeed).
	Seed int64
	// OnEpisode, if set, is called with the statistics of every finished
	// episode as the first agent saw them (for a shared-reward environment
	// such as simple_spread, every agent sees the same).
	OnEpisode func(api.EpisodeStat)
	// OnPolicyEpisode, if set, is called for every finished episode once
	// per policy that has agents in the environment, with the mean over
	// those agents of their episode returns.
	OnPolicyEpisode func(policy string, ret float64)
}

// AgentRoute is the policy side of one agent: who answers its inference
// requests, where its batches go, what labels them, and how long they are
// (0: TargetConfig.SampleSteps).
type AgentRoute struct {
	Client      stream.InferenceClient
	Producer    stream.SamplePoster
	Policy      string
	SampleSteps int
	// SpanEpisodes carries the agent's batches on across terminations
	// (span_episodes): they end when full or at a truncation, not at every
	// episode's end.
	SpanEpisodes bool
	// VersionCuts ends the agent's batch when an action comes from a newer
	// policy version than every step in it (version_cuts), so that an
	// on-policy trainer, which drops a batch whole once its oldest step is
	// stale, drops no step of a newer version with it.
	VersionCuts bool
}

// TargetStats are an EnvTarget's counters.
type TargetStats struct {
	EnvSteps          int64 // calls of Env.Step
	AgentSteps        int64 // steps recorded, summed over agents
	Episodes          int64 // episodes finished
	BatchesSent       int64 // batches the producer accepted
	InferenceFailures int64 // failed requests, posted again
	Backpressure      int64 // batches refused by the producer, kept for a retry
	// Version is the policy version of the last inference result taken.
	Version int64
}

// Add adds o's counts to s; Version becomes the newer of the two.
func (s *TargetStats) Add(o TargetStats) {
	s.EnvSteps += o.EnvSteps
	s.AgentSteps += o.AgentSteps
	s.Episodes += o.Episodes
	s.BatchesSent += o.BatchesSent
	s.InferenceFailures += o.InferenceFailures
	s.Backpressure += o.Backpressure
	s.Version = max(s.Version, o.Version)
}

type phase int

const (
	phaseIdle          phase = iota // not reset yet
	phaseStepping                   // every agent waits for its action
	phaseBootstrapping              // truncated agents wait for the value of their final observation
	phaseDone                       // drained: no more steps
)

// EnvTarget is one environment and its agents. It steps once every agent's
// action is available, records the transition, and either asks for the
// next actions or, at the end of an episode, finishes it and starts the
// next one.
//
// The environment is one of an api.EnvBatch. [EnvTarget.Step] runs the
// target's environment calls on their own; an actor stepping a whole ring
// splits each step into prepare (take the results, say which call is
// needed), one [api.EnvBatch.Run] for every target, and complete (record
// the outcome), so that out-of-process environments cost one message per
// ring rather than one per environment.
type EnvTarget struct {
	batch     api.EnvBatch
	env       int  // index in batch
	ownsBatch bool // Close closes batch
	index     int
	seed      int64
	onEpisode func(api.EpisodeStat)
	agents    []*Agent

	// onPolicyEpisode, policies (the distinct policies of the agents, in
	// agent order) and policyOf (each agent's, an index in policies); the
	// returns of an ended episode are summed per policy in epSum and
	// epCount.
	onPolicyEpisode func(policy string, ret float64)
	policies        []string
	policyOf        []int
	epSum           []float64
	epCount         []int

	phase    phase
	draining bool
	actions  []api.Action
	stats    TargetStats
	// sum is where the target's counts are also added: its ring's
	// running total (EnvRing.Stats), so that an actor reads its totals
	// without visiting every target, which it did three times a poll.
	sum *TargetStats

	// resetDue: the next environment call is a reset with resetSeed.
	resetDue  bool
	resetSeed int64
}

// envCall is the environment call a target needs next.
type envCall int

const (
	callNone  envCall = iota
	callReset         // reset with resetSeed
	callStep          // step with actions
)

// NewEnvTarget wraps env, which becomes the target's (Close closes it), as
// target index of its ring. Each of env's agents gets its own sample
// builder, labelled with the agent's id.
func NewEnvTarget(env api.Env, index int, cfg TargetConfig) (*EnvTarget, error) {
	if env == nil {
		return nil, errors.New("actorworker: NewEnvTarget: nil environment")
	}
	t, err := NewBatchTarget(api.SerialBatch(env), 0, index, cfg)
	if err != nil {
		return nil, err
	}
	t.ownsBatch = true
	return t, nil
}

// NewBatchTarget is environment env of batch as target index of its ring.
// The batch stays the caller's to close.
func NewBatchTarget(batch api.EnvBatch, env, index int, cfg TargetConfig) (*EnvTarget, error) {
	if cfg.Route == nil && (cfg.Client == nil || cfg.Producer == nil) {
		return nil, errors.New("actorworker: NewEnvTarget: Client and Producer are required")
	}
	if env < 0 || env >= batch.Len() {
		return nil, fmt.Errorf("actorworker: target %d: environment %d of a batch of %d", index, env, batch.Len())
	}
	if cfg.SampleSteps <= 0 {
		cfg.SampleSteps = DefaultSampleSteps
	}
	obsSpace := batch.ObservationSpace()
	obsDim := obsSpace.Size()
	actDim := 0
	if as := batch.ActionSpace(); as.Kind == api.Box {
		actDim = as.Size()
	}
	t := &EnvTarget{
		batch: batch, env: env, index: index, seed: cfg.Seed, onEpisode: cfg.OnEpisode, onPolicyEpisode: cfg.OnPolicyEpisode,
		sum: new(TargetStats), // until a ring takes the target
	}
	for i, id := range batch.Agents() {
		r := AgentRoute{Client: cfg.Client, Producer: cfg.Producer, Policy: cfg.Policy,
			SpanEpisodes: cfg.SpanEpisodes, VersionCuts: cfg.VersionCuts}
		if cfg.Route != nil {
			r = cfg.Route(i, id)
		}
		if r.Client == nil || r.Producer == nil {
			return nil, fmt.Errorf("actorworker: target %d agent %s: no inference client or sample producer", index, id)
		}
		r.SampleSteps = cmp.Or(max(r.SampleSteps, 0), cfg.SampleSteps)
		b, err := api.NewSampleBuilder(obsDim, actDim, r.SampleSteps)
		if err != nil {
			return nil, fmt.Errorf("actorworker: target %d agent %s: %w", index, id, err)
		}
		b.Policy, b.ActorID, b.AgentID = r.Policy, cfg.ActorID, id
		// An image observation ([H, W, C]) keeps its shape in the batches,
		// so that a learner or replay can tell its frames' layout.
		if obsSpace.Kind == api.Box && len(obsSpace.Shape) > 1 {
			if err := b.SetObsShape(obsSpace.Shape...); err != nil {
				return nil, fmt.Errorf("actorworker: target %d agent %s: %w", index, id, err)
			}
		}
		t.agents = append(t.agents, newAgent(id, r, b))
		p := slices.Index(t.policies, r.Policy)
		if p < 0 {
			p = len(t.policies)
			t.policies = append(t.policies, r.Policy)
		}
		t.policyOf = append(t.policyOf, p)
	}
	if len(t.agents) == 0 {
		return nil, fmt.Errorf("actorworker: target %d: the environment has no agents", index)
	}
	t.actions = make([]api.Action, len(t.agents))
	t.epSum, t.epCount = make([]float64, len(t.policies)), make([]int, len(t.policies))
	return t, nil
}

// Agents returns the target's agents, in the environment's order.
func (t *EnvTarget) Agents() []*Agent { return t.agents }

// Stats returns the target's counters.
func (t *EnvTarget) Stats() TargetStats { return t.stats }

// Reset starts an episode with seed and posts every agent's first
// observation. Later episodes are seeded by EnvSeed.
func (t *EnvTarget) Reset(ctx context.Context, seed int64) error {
	t.resetDue, t.resetSeed = true, seed
	_, err := t.run(ctx, callReset)
	return err
}

// run makes the environment call alone and completes it.
func (t *EnvTarget) run(ctx context.Context, call envCall) (int, error) {
	switch call {
	case callReset:
		r := []api.EnvReset{t.resetCall()}
		if err := t.batch.Run(ctx, r, nil); err != nil {
			return 0, fmt.Errorf("actorworker: target %d: reset: %w", t.index, err)
		}
		return 0, t.completeReset(r[0])
	case callStep:
		s := []api.EnvStep{t.stepCall()}
		if err := t.batch.Run(ctx, nil, s); err != nil {
			return 0, fmt.Errorf("actorworker: target %d: step: %w", t.index, err)
		}
		return t.completeStep(s[0].Result)
	}
	return 0, nil
}

// resetCall is the reset the target needs.
func (t *EnvTarget) resetCall() api.EnvReset { return api.EnvReset{Env: t.env, Seed: t.resetSeed} }

// stepCall is the step the target needs; its Actions are the target's
// until the next prepare.
func (t *EnvTarget) stepCall() api.EnvStep { return api.EnvStep{Env: t.env, Actions: t.actions} }

// completeReset posts the first observations of the episode, of the
// agents that act first.
func (t *EnvTarget) completeReset(r api.EnvReset) error {
	t.resetDue = false
	obs := r.Obs
	if len(obs) != len(t.agents) || (r.Acting != nil && len(r.Acting) != len(t.agents)) {
		return fmt.Errorf("actorworker: target %d: reset returned %d observations and %d acting flags for %d agents", t.index, len(obs), len(r.Acting), len(t.agents))
	}
	for i, a := range t.agents {
		if s, ok := a.client.(episodeStarter); ok {
			if err := s.startEpisode(); err != nil {
				return fmt.Errorf("actorworker: target %d agent %s: %w", t.index, a.id, err)
			}
		}
		a.open, a.reward = false, 0
		if a.acts = api.IsActing(r.Acting, i); !a.acts {
			continue
		}
		if err := a.post(obs[i]); err != nil {
			return fmt.Errorf("actorworker: target %d: %w", t.index, err)
		}
	}
	t.phase = phaseStepping
	return nil
}

// ReadyToStep reports whether Step can make progress: every agent that
// waits has its result (or failure) available, and no agent holds a batch
// its producer refused. The latter keeps an actor whose trainer cannot
// keep up from buffering without bound.
func (t *EnvTarget) ReadyToStep() bool {
	if t.resetDue {
		return true
	}
	if t.phase != phaseStepping && t.phase != phaseBootstrapping {
		return false
	}
	for _, a := range t.agents {
		if len(a.outbox) > 0 || (a.posted && !a.client.Ready(a.pending)) {
			return false
		}
	}
	return true
}

// Step takes the available results and, once every agent has its action,
// steps the environment; see the package documentation for how batches are
// cut. A failed inference is posted again and the target stays not ready
// for that agent. Step returns the number of agent steps recorded (0 or
// the number of agents) and sends the batches that are complete.
func (t *EnvTarget) Step(ctx context.Context) (int, error) {
	call, err := t.prepare()
	if err != nil || call == callNone {
		return 0, err
	}
	n, err := t.run(ctx, call)
	if err != nil || !t.resetDue {
		return n, err
	}
	// The episode terminated: the next one starts at once.
	_, err = t.run(ctx, callReset)
	return n, err
}

// prepare takes the available results and says which environment call
// the target needs: a step once every agent has its action, a reset once
// an ended episode's batches are complete, or none.
func (t *EnvTarget) prepare() (envCall, error) {
	if t.resetDue {
		return callReset, nil
	}
	if t.phase != phaseStepping && t.phase != phaseBootstrapping {
		return callNone, nil
	}
	if err := t.send(); err != nil || t.unsent() {
		return callNone, err // back-pressure: no step until the trainer takes the batch
	}
	all := true
	for _, a := range t.agents {
		if a.hasResult || !a.posted {
			continue
		}
		if !a.client.Ready(a.pending) {
			all = false
			continue
		}
		ok, err := a.take()
		if err != nil {
			return callNone, fmt.Errorf("actorworker: target %d: %w", t.index, err)
		}
		if !ok {
			t.stats.InferenceFailures++
			t.sum.InferenceFailures++
			all = false
			continue
		}
		t.stats.Version = a.result.Version
		t.sum.Version = max(t.sum.Version, a.result.Version)
	}
	if !all {
		return callNone, t.send()
	}
	// A result may have completed a batch waiting for its bootstrap value;
	// if the producer refuses it, the step waits with the results taken.
	if err := t.send(); err != nil || t.unsent() {
		return callNone, err
	}
	switch t.phase {
	case phaseStepping:
		if t.draining {
			// The results carry the value of the observation after each
			// agent's last step: exactly the bootstrap value its partial
			// batch needs.
			for _, a := range t.agents {
				a.cutRemainder()
			}
			t.phase = phaseDone
			return callNone, t.send()
		}
		for i, a := range t.agents {
			t.actions[i] = api.Action{}
			if a.acts {
				t.actions[i] = a.action()
			}
		}
		return callStep, nil
	case phaseBootstrapping:
		t.finishEpisode()
		if t.resetDue {
			return callReset, nil
		}
		return callNone, t.send()
	}
	return callNone, nil
}

// completeStep records the outcome of the step prepare asked for.
func (t *EnvTarget) completeStep(s api.Step) (int, error) {
	n := len(t.agents)
	if len(s.Obs) != n || len(s.Rewards) != n || len(s.Terminated) != n || len(s.Truncated) != n || (s.Acting != nil && len(s.Acting) != n) {
		return 0, fmt.Errorf("actorworker: target %d: step returned %d observations, %d rewards, %d terminated, %d truncated, %d acting flags for %d agents",
			t.index, len(s.Obs), len(s.Rewards), len(s.Terminated), len(s.Truncated), len(s.Acting), n)
	}
	t.stats.EnvSteps++
	t.sum.EnvSteps++
	done := s.Done()
	bootstrap := false
	recorded := 0
	for i, a := range t.agents {
		term := s.Terminated[i]
		// The episode ends for every agent when it ends for one; an agent
		// the environment did not flag was cut short.
		trunc := !term && (s.Truncated[i] || done)
		// An agent that acted opens a transition; one that sat the step
		// out (its turn had not come) adds the step's reward to the
		// transition it opened last. A transition is recorded when its
		// agent acts again or the episode ends: then its observation is
		// the next one its agent saw at its turn. Without turns every
		// agent acts at every step, and every step is recorded.
		if a.acts {
			a.open = true
		}
		a.reward += s.Rewards[i]
		next := !done && api.IsActing(s.Acting, i)
		ended := a.open && (done || next)
		if ended {
			ep, over, err := a.record(a.reward, term, trunc)
			if err != nil {
				return 0, fmt.Errorf("actorworker: target %d: %w", t.index, err)
			}
			a.open, a.reward = false, 0
			recorded++
			if over {
				if i == 0 && t.onEpisode != nil {
					t.onEpisode(ep)
				}
				t.epSum[t.policyOf[i]] += float64(ep.Return)
				t.epCount[t.policyOf[i]]++
			}
		}
		// The next request is for the observation after the step: the
		// next action, or, after a truncation, only the bootstrap value of
		// the transition just ended.
		if a.acts = next; next || (ended && trunc) {
			if err := a.post(s.Obs[i]); err != nil {
				return 0, fmt.Errorf("actorworker: target %d: %w", t.index, err)
			}
			bootstrap = bootstrap || done
		}
	}
	t.stats.AgentSteps += int64(recorded)
	t.sum.AgentSteps += int64(recorded)
	if done {
		t.stats.Episodes++
		t.sum.Episodes++
		t.policyEpisodes()
		if bootstrap {
			t.phase = phaseBootstrapping
		} else {
			t.finishEpisode()
		}
	}
	return recorded, t.send()
}

// policyEpisodes reports the returns of the episode that just ended, per
// policy (the mean over that policy's agents), and clears the sums.
func (t *EnvTarget) policyEpisodes() {
	for p, n := range t.epCount {
		if n > 0 && t.onPolicyEpisode != nil {
			t.onPolicyEpisode(t.policies[p], t.epSum[p]/float64(n))
		}
		t.epSum[p], t.epCount[p] = 0, 0
	}
}

// finishEpisode makes the next episode's reset due once the bootstrap
// values (if any) have completed the ended episode's batches. The actions
// of the bootstrap requests are not used.
func (t *EnvTarget) finishEpisode() {
	for _, a := range t.agents {
		a.hasResult = false
	}
	if t.draining {
		t.phase = phaseDone
		return
	}
	t.resetDue, t.resetSeed = true, EnvSeed(t.seed, t.index, int(t.stats.Episodes))
}

// Send posts the batches that are complete, keeping those refused with
// back-pressure for the next call. It returns the number sent.
func (t *EnvTarget) Send() (int, error) {
	before := t.stats.BatchesSent
	err := t.send()
	return int(t.stats.BatchesSent - before), err
}

func (t *EnvTarget) send() error {
	for _, a := range t.agents {
		sent, refused, err := a.send()
		t.stats.BatchesSent += int64(sent)
		t.sum.BatchesSent += int64(sent)
		if refused {
			t.stats.Backpressure++
			t.sum.Backpressure++
		}
		if err != nil {
			return fmt.Errorf("actorworker: target %d: %w", t.index, err)
		}
	}
	return nil
}

// unsent reports whether an agent holds a batch its producer refused.
func (t *EnvTarget) unsent() bool {
	for _, a := range t.agents {
		if len(a.outbox) > 0 {
			return true
		}
	}
	return false
}

// Drain stops the target: the next Step finishes every agent's partial
// batch (with the value of the observation after its last step, from the
// results it takes) instead of stepping, and no episode starts after the
// current one. AllDone reports when that is over.
func (t *EnvTarget) Drain() {
	t.draining = true
	if t.phase == phaseIdle {
		t.phase = phaseDone
	}
}

// AllDone reports whether a drained target has finished: every agent's
// batches are complete and sent.
func (t *EnvTarget) AllDone() bool {
	if t.phase != phaseDone {
		return false
	}
	for _, a := range t.agents {
		if a.Unsent() > 0 {
			return false
		}
	}
	return true
}

// Close closes the environment if the target owns it (NewEnvTarget).
func (t *EnvTarget) Close() error {
	if !t.ownsBatch {
		return nil
	}
	if err := t.batch.Close(); err != nil {
		return fmt.Errorf("actorworker: target %d: close environment: %w", t.index, err)
	}
	return nil
}

// EnvRing is the round of targets an actor steps in turn.
type EnvRing struct {
	targets []*EnvTarget
	cur     int
	total   TargetStats // the targets' counters summed, kept as they count
}

// NewEnvRing returns a ring of targets, starting at the first.
func NewEnvRing(targets ...*EnvTarget) *EnvRing {
	r := &EnvRing{}
	r.Add(targets...)
	return r
}

// Stats returns the targets' counters summed (Version: the newest), as
// of their last count.
func (r *EnvRing) Stats() TargetStats { return r.total }

// Len returns the number of targets.
func (r *EnvRing) Len() int { return len(r.targets) }

// Add appends targets to the ring, after the last; from then on they
// count into the ring's Stats. A target belongs to one ring.
func (r *EnvRing) Add(targets ...*EnvTarget) {
	for _, t := range targets {
		r.total.Add(t.stats)
		t.sum = &r.total
	}
	r.targets = append(r.targets, targets...)
}

// Targets returns the targets in ring order.
func (r *EnvRing) Targets() []*EnvTarget { return r.targets }

// Current returns the target whose turn it is.
func (r *EnvRing) Current() *EnvTarget { return r.targets[r.cur] }

// Rotate passes the turn to the next target.
func (r *EnvRing) Rotate() { r.cur = (r.cur + 1) % len(r.targets) }
