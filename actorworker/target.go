package actorworker

import (
	"errors"
	"fmt"

	"github.com/distrl/distrl/api"
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
	// Client answers every agent's inference requests.
	Client InferenceClient
	// Producer sends every agent's sample batches.
	Producer SampleProducer
	// Policy and ActorID label the batches.
	Policy, ActorID string
	// SampleSteps is the length of a batch cut mid-episode; 0 means
	// DefaultSampleSteps.
	SampleSteps int
	// Seed is the actor's seed, from which episode seeds derive (EnvSeed).
	Seed int64
	// OnEpisode, if set, is called with the statistics of every finished
	// episode as the first agent saw them (for a shared-reward environment
	// such as simple_spread, every agent sees the same).
	OnEpisode func(api.EpisodeStat)
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
type EnvTarget struct {
	env         api.Env
	index       int
	seed        int64
	sampleSteps int
	onEpisode   func(api.EpisodeStat)
	agents      []*Agent

	phase    phase
	draining bool
	actions  []api.Action
	stats    TargetStats
}

// NewEnvTarget wraps env, which becomes the target's (Close closes it), as
// target index of its ring. Each of env's agents gets its own sample
// builder, labelled with the agent's id.
func NewEnvTarget(env api.Env, index int, cfg TargetConfig) (*EnvTarget, error) {
	if cfg.Client == nil || cfg.Producer == nil {
		return nil, errors.New("actorworker: NewEnvTarget: Client and Producer are required")
	}
	if cfg.SampleSteps <= 0 {
		cfg.SampleSteps = DefaultSampleSteps
	}
	obsDim := env.ObservationSpace().Size()
	actDim := 0
	if as := env.ActionSpace(); as.Kind == api.Box {
		actDim = as.Size()
	}
	t := &EnvTarget{
		env: env, index: index, seed: cfg.Seed, sampleSteps: cfg.SampleSteps, onEpisode: cfg.OnEpisode,
	}
	for _, id := range env.Agents() {
		b, err := api.NewSampleBuilder(obsDim, actDim, cfg.SampleSteps)
		if err != nil {
			return nil, fmt.Errorf("actorworker: target %d agent %s: %w", index, id, err)
		}
		b.Policy, b.ActorID, b.AgentID = cfg.Policy, cfg.ActorID, id
		t.agents = append(t.agents, newAgent(id, cfg.Client, cfg.Producer, b))
	}
	if len(t.agents) == 0 {
		return nil, fmt.Errorf("actorworker: target %d: the environment has no agents", index)
	}
	t.actions = make([]api.Action, len(t.agents))
	return t, nil
}

// Agents returns the target's agents, in the environment's order.
func (t *EnvTarget) Agents() []*Agent { return t.agents }

// Stats returns the target's counters.
func (t *EnvTarget) Stats() TargetStats { return t.stats }

// Reset starts an episode with seed and posts every agent's first
// observation. Later episodes are seeded by EnvSeed.
func (t *EnvTarget) Reset(seed int64) error {
	obs, err := t.env.Reset(seed)
	if err != nil {
		return fmt.Errorf("actorworker: target %d: reset: %w", t.index, err)
	}
	if len(obs) != len(t.agents) {
		return fmt.Errorf("actorworker: target %d: reset returned %d observations for %d agents", t.index, len(obs), len(t.agents))
	}
	for i, a := range t.agents {
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
func (t *EnvTarget) Step() (int, error) {
	if t.phase != phaseStepping && t.phase != phaseBootstrapping {
		return 0, nil
	}
	if err := t.send(); err != nil || t.unsent() {
		return 0, err // back-pressure: no step until the trainer takes the batch
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
			return 0, fmt.Errorf("actorworker: target %d: %w", t.index, err)
		}
		if !ok {
			t.stats.InferenceFailures++
			all = false
			continue
		}
		t.stats.Version = a.result.Version
	}
	if !all {
		return 0, t.send()
	}
	// A result may have completed a batch waiting for its bootstrap value;
	// if the producer refuses it, the step waits with the results taken.
	if err := t.send(); err != nil || t.unsent() {
		return 0, err
	}
	var n int
	var err error
	switch t.phase {
	case phaseStepping:
		n, err = t.step()
	case phaseBootstrapping:
		err = t.finishEpisode()
	}
	if err != nil {
		return n, err
	}
	return n, t.send()
}

// step runs one environment step with the actions taken.
func (t *EnvTarget) step() (int, error) {
	if t.draining {
		// The results carry the value of the observation after each
		// agent's last step: exactly the bootstrap value its partial batch
		// needs.
		for _, a := range t.agents {
			a.cutRemainder()
		}
		t.phase = phaseDone
		return 0, nil
	}
	for i, a := range t.agents {
		t.actions[i] = a.action()
	}
	s, err := t.env.Step(t.actions)
	if err != nil {
		return 0, fmt.Errorf("actorworker: target %d: step: %w", t.index, err)
	}
	n := len(t.agents)
	if len(s.Obs) != n || len(s.Rewards) != n || len(s.Terminated) != n || len(s.Truncated) != n {
		return 0, fmt.Errorf("actorworker: target %d: step returned %d observations, %d rewards, %d terminated, %d truncated for %d agents",
			t.index, len(s.Obs), len(s.Rewards), len(s.Terminated), len(s.Truncated), n)
	}
	t.stats.EnvSteps++
	t.stats.AgentSteps += int64(n)
	done := s.Done()
	bootstrap := false
	for i, a := range t.agents {
		term := s.Terminated[i]
		// The episode ends for every agent when it ends for one; an agent
		// the environment did not flag was cut short.
		trunc := !term && (s.Truncated[i] || done)
		episodes, err := a.record(s.Rewards[i], term, trunc, t.sampleSteps)
		if err != nil {
			return 0, fmt.Errorf("actorworker: target %d: %w", t.index, err)
		}
		if i == 0 && t.onEpisode != nil {
			for _, e := range episodes {
				t.onEpisode(e)
			}
		}
		// The next request is for the observation after the step: the
		// next action, or, after a truncation, only the bootstrap value.
		if !done || trunc {
			if err := a.post(s.Obs[i]); err != nil {
				return 0, fmt.Errorf("actorworker: target %d: %w", t.index, err)
			}
			bootstrap = bootstrap || done
		}
	}
	if !done {
		return n, nil
	}
	t.stats.Episodes++
	if bootstrap {
		t.phase = phaseBootstrapping
		return n, nil
	}
	return n, t.finishEpisode()
}

// finishEpisode starts the next episode once the bootstrap values (if any)
// have completed the ended episode's batches. The actions of the bootstrap
// requests are not used.
func (t *EnvTarget) finishEpisode() error {
	for _, a := range t.agents {
		a.hasResult = false
	}
	if t.draining {
		t.phase = phaseDone
		return nil
	}
	return t.Reset(EnvSeed(t.seed, t.index, int(t.stats.Episodes)))
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
		if refused {
			t.stats.Backpressure++
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

// Close closes the environment.
func (t *EnvTarget) Close() error {
	if err := t.env.Close(); err != nil {
		return fmt.Errorf("actorworker: target %d: close environment: %w", t.index, err)
	}
	return nil
}

// EnvRing is the round of targets an actor steps in turn.
type EnvRing struct {
	targets []*EnvTarget
	cur     int
}

// NewEnvRing returns a ring of targets, starting at the first.
func NewEnvRing(targets ...*EnvTarget) *EnvRing { return &EnvRing{targets: targets} }

// Len returns the number of targets.
func (r *EnvRing) Len() int { return len(r.targets) }

// Targets returns the targets in ring order.
func (r *EnvRing) Targets() []*EnvTarget { return r.targets }

// Current returns the target whose turn it is.
func (r *EnvRing) Current() *EnvTarget { return r.targets[r.cur] }

// Rotate passes the turn to the next target.
func (r *EnvRing) Rotate() { r.cur = (r.cur + 1) % len(r.targets) }
