package actorworker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/stream"
)

// Agent is one agent of one environment. It is either waiting for the
// result of its pending inference request, or holding that result until
// its EnvTarget steps.
//
// Besides the batch being filled (in its SampleBuilder) an agent holds at
// most a few finished batches: one waiting for its bootstrap value, and the
// ones its sample producer refused with back-pressure, which are retried
// in order.
type Agent struct {
	id       string
	client   stream.InferenceClient
	producer stream.SamplePoster
	builder  *api.SampleBuilder
	// sampleSteps is the length of a batch cut mid-episode: the agent's
	// own, since agents of different policies may be batched differently.
	sampleSteps int
	// spanEpisodes carries a batch on across terminations, versionCuts
	// ends one at a newer policy version (AgentRoute).
	spanEpisodes, versionCuts bool

	// steps and sent count the agent's recorded steps and the batches its
	// producer accepted, for the actor's per-policy statistics.
	steps, sent int64

	obs     []float32    // the observation of the pending request, owned
	pending stream.ReqID // valid while posted
	posted  bool         // a request is outstanding (result not consumed)

	result    stream.InferenceResult
	hasResult bool // result is for obs and not yet used

	// For an environment whose agents take turns (api.Turns): acts, the
	// agent's action applies at the next step; open, it acted since its
	// last recorded transition, which waits, gathering reward, for its
	// next turn or the episode's end. Without turns both are true from
	// each post to the record after it.
	acts, open bool
	reward     float32

	held   *api.SampleBatch   // finished, waiting for its bootstrap value
	outbox []*api.SampleBatch // complete, not yet accepted by the producer
	free   []*api.SampleBatch // sent: to hold the next batches
}

// newAgent returns an agent that asks r.Client for its actions and sends
// the batches of builder, cut as r says (r.SampleSteps is set), through
// r.Producer. builder's Policy, ActorID and AgentID label the batches.
func newAgent(id string, r AgentRoute, builder *api.SampleBuilder) *Agent {
	return &Agent{id: id, client: r.Client, producer: r.Producer, builder: builder,
		sampleSteps: r.SampleSteps, spanEpisodes: r.SpanEpisodes, versionCuts: r.VersionCuts}
}

// ID returns the agent's id in its environment.
func (a *Agent) ID() string { return a.id }

// Policy returns the policy the agent acts for, which labels its batches.
func (a *Agent) Policy() string { return a.builder.Policy }

// Ready reports whether the agent's action is available: its result was
// taken already, or its pending request has a result or a failure.
func (a *Agent) Ready() bool {
	return a.hasResult || (a.posted && a.client.Ready(a.pending))
}

// Waiting reports whether the agent has a request whose result it has not
// taken yet.
func (a *Agent) Waiting() bool { return a.posted }

// Unsent returns how many finished batches the agent holds: waiting for a
// bootstrap value or refused by the producer.
func (a *Agent) Unsent() int {
	n := len(a.outbox)
	if a.held != nil {
		n++
	}
	return n
}

// post asks for an action for obs, which the agent copies: an environment
// may reuse its observation buffers.
func (a *Agent) post(obs []float32) error {
	a.obs = append(a.obs[:0], obs...)
	id, err := a.client.Post(a.obs)
	if err != nil {
		return fmt.Errorf("agent %s: post observation: %w", a.id, err)
	}
	a.pending, a.posted, a.hasResult = id, true, false
	return nil
}

// take consumes the pending result. It reports false if inference failed,
// in which case the same observation is posted again: the action is still
// needed, and the policy worker may be back by the next flush. A result
// completes the batch waiting for its bootstrap value, since it carries
// the value of the observation that follows that batch; with versionCuts,
// a result of a newer policy version than every step of the batch being
// filled ends that batch the same way, so that its steps are of one
// version.
func (a *Agent) take() (bool, error) {
	res, err := a.client.Consume(a.pending)
	a.posted = false
	if errors.Is(err, stream.ErrInferenceFailed) {
		return false, a.post(a.obs)
	}
	if errors.Is(err, stream.ErrInferenceRefused) {
		return false, fmt.Errorf("agent %s: %w (give the actors and the policy workers the same env and env_config, frame_stack included)", a.id, err)
	}
	if err != nil {
		return false, fmt.Errorf("agent %s: consume inference result: %w", a.id, err)
	}
	a.result, a.hasResult = res, true
	// Newer than every step, not merely another: results of policy workers
	// a version apart, taking turns, cut once, not at every step.
	if newest, ok := a.builder.NewestVersion(); a.versionCuts && ok && res.Version > newest {
		a.outbox = append(a.outbox, a.box(a.builder.Build(res.Value)))
	}
	if a.held != nil {
		a.held.BootstrapValue = res.Value
		a.outbox = append(a.outbox, a.held)
		a.held = nil
	}
	return true, nil
}

// action is the action of the taken result.
func (a *Agent) action() api.Action {
	return api.Action{Discrete: a.result.Action, Continuous: a.result.ContAction}
}

// record appends the step taken with the current result and cuts the batch
// as the bootstrap rules say. If the step ended the episode (terminated or
// truncated), it returns that episode's return and length and true.
func (a *Agent) record(reward float32, terminated, truncated bool) (api.EpisodeStat, bool, error) {
	err := a.builder.Append(api.StepRecord{
		Obs: a.obs, Action: a.action(), Reward: reward,
		Terminated: terminated, Truncated: truncated,
		LogProb: a.result.LogProb, Value: a.result.Value, Version: a.result.Version,
	})
	a.hasResult = false
	if err != nil {
		return api.EpisodeStat{}, false, fmt.Errorf("agent %s: record step: %w", a.id, err)
	}
	a.steps++
	var ep api.EpisodeStat
	ended := terminated || truncated
	if ended {
		eps := a.builder.Episodes()
		ep = eps[len(eps)-1]
	}
	switch batchEndAfter(terminated, truncated, a.builder.Len(), a.sampleSteps, a.spanEpisodes) {
	case sendNow:
		a.outbox = append(a.outbox, a.box(a.builder.Build(0)))
	case awaitBootstrap:
		a.held = a.box(a.builder.Build(0)) // BootstrapValue is set by the next take
	}
	return ep, ended, nil
}

// box puts b in a batch that was sent, or a new one: a batch a step
// would otherwise cost an allocation of its own.
func (a *Agent) box(b api.SampleBatch) *api.SampleBatch {
	var p *api.SampleBatch
	if k := len(a.free); k > 0 {
		p, a.free[k-1], a.free = a.free[k-1], nil, a.free[:k-1]
	} else {
		p = new(api.SampleBatch)
	}
	*p = b
	return p
}

// cutRemainder finishes the partial batch with the value of the taken
// result, which is for the observation after its last step; used when the
// actor stops.
func (a *Agent) cutRemainder() *api.SampleBatch {
	a.hasResult = false
	if a.builder.Len() == 0 {
		return nil
	}
	b := a.builder.Build(a.result.Value)
	a.outbox = append(a.outbox, &b)
	return &b
}

// send posts the agent's complete batches in order. It stops at the first
// one refused with back-pressure, which stays for the next attempt, and
// reports whether that happened.
func (a *Agent) send() (sent int, refused bool, err error) {
	for len(a.outbox) > 0 {
		err := a.producer.Post(a.outbox[0])
		if errors.Is(err, stream.ErrBackpressure) {
			return sent, true, nil
		}
		if err != nil {
			return sent, false, fmt.Errorf("agent %s: send sample batch: %w", a.id, err)
		}
		// Post does not retain the batch (see stream.SamplePoster), so its
		// arrays can hold the agent's next batch.
		a.builder.Recycle(*a.outbox[0])
		a.free = append(a.free, a.outbox[0])
		a.outbox = slices.Delete(a.outbox, 0, 1)
		sent++
		a.sent++
	}
	return sent, false, nil
}
