package telemetry

import (
	"cmp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Identity names the worker a handle records for: its metric labels.
type Identity struct {
	Experiment, Trial, Type string
	Index                   int
	// Group is the worker's group in its experiment (workers of two
	// policy groups share a type); empty: the type.
	Group string
}

// Loop is the heartbeat of the loop that runs one or more workers (a
// process hosting many shares one).
type Loop struct{ last atomic.Int64 }

// Turned records that the loop turned at t.
func (l *Loop) Turned(t time.Time) { l.last.Store(t.UnixNano()) }

// Worker records one worker's metrics. Its methods are safe for
// concurrent use. SetLoop, SetState, Request and Remove of a nil *Worker
// do nothing (a worker made without a registry).
type Worker struct {
	r      *Registry
	labels []string
	loop   atomic.Pointer[Loop]

	mu    sync.Mutex
	state prometheus.Gauge // the state set to 1, nil before the first
	rpc   map[[2]string]prometheus.Counter

	Polls       prometheus.Counter
	PollSeconds prometheus.Counter

	actor   *Actor
	policy  *Policy
	trainer *Trainer
	sink    *Sink
	replay  map[string]*ReplayTable
}

// Worker returns the handle of the worker id. Each call makes a new
// handle for the same series; Remove one before making another.
func (r *Registry) Worker(id Identity) *Worker {
	w := &Worker{
		r:      r,
		labels: []string{id.Experiment, id.Trial, id.Type, strconv.Itoa(id.Index), cmp.Or(id.Group, id.Type)},
		rpc:    map[[2]string]prometheus.Counter{},
		replay: map[string]*ReplayTable{},
	}
	w.Polls = r.polls.WithLabelValues(w.labels...)
	w.PollSeconds = r.pollSeconds.WithLabelValues(w.labels...)
	r.mu.Lock()
	r.workers[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// Discard returns a handle whose figures go to a registry of its own that
// nothing serves: for workers made outside a process's registry (unit
// tests of a worker type).
func Discard(id Identity) *Worker { return NewRegistry().Worker(id) }

// SetLoop names the loop that runs the worker, for its heartbeat age.
func (w *Worker) SetLoop(l *Loop) {
	if w != nil {
		w.loop.Store(l)
	}
}

// SetState makes state the worker's current one in distrl_worker_state.
func (w *Worker) SetState(state string) {
	if w == nil {
		return
	}
	g := w.r.state.WithLabelValues(append(w.labels[:len(w.labels):len(w.labels)], state)...)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != nil {
		w.state.Set(0)
	}
	g.Set(1)
	w.state = g
}

// Request counts one request the worker answered: command (as known to
// the worker; "" for one it does not know, counted as "unknown", so that
// clients cannot make series of their own) and outcome ("ok" or the
// error type).
func (w *Worker) Request(command, outcome string) {
	if w == nil {
		return
	}
	if command == "" {
		command = "unknown"
	}
	key := [2]string{command, outcome}
	w.mu.Lock()
	c, ok := w.rpc[key]
	if !ok {
		c = w.r.rpc.WithLabelValues(append(w.labels[:len(w.labels):len(w.labels)], command, outcome)...)
		w.rpc[key] = c
	}
	w.mu.Unlock()
	c.Inc()
}

// Remove deletes every series of the worker from the registry: a worker
// that is gone from a process that goes on (hosted workers) leaves none
// behind.
func (w *Worker) Remove() {
	if w == nil {
		return
	}
	r := w.r
	r.mu.Lock()
	delete(r.workers, w)
	r.mu.Unlock()
	match := prometheus.Labels{}
	for i, l := range workerLabels {
		match[l] = w.labels[i]
	}
	for _, v := range r.vecs() {
		v.DeletePartialMatch(match)
	}
}

// partialDeleter is what every *Vec of client_golang implements.
type partialDeleter interface {
	DeletePartialMatch(prometheus.Labels) int
}

func (r *Registry) vecs() []partialDeleter {
	return []partialDeleter{
		r.state, r.polls, r.pollSeconds, r.rpc,
		r.envSteps, r.episodes, r.episodeReturn, r.inferFailures, r.backpressured,
		r.batchSize, r.queueWait, r.forward, r.version,
		r.samplesTrained, r.droppedStale, r.updates, r.policyLag, r.loss, r.checkpoints, r.groupReforms, r.allreduceSecs, r.updateSecs, r.loopSecs,
		r.replayItems, r.replayInserts, r.replaySamples, r.limiterWaits,
		r.sinkSamples,
	}
}

// Actor is what an actor records.
type Actor struct {
	EnvSteps prometheus.Counter
	Episodes prometheus.Counter
	// Return is the mean return of the last member.ReturnWindow episodes.
	Return            prometheus.Gauge
	InferenceFailures prometheus.Counter
	// Backpressured counts the seconds the actor held batches its sample
	// consumers had no room for (a trial bound by its trainer).
	Backpressured prometheus.Counter
}

// Policy is what a policy worker records.
type Policy struct {
	// BatchSize observes the rows of each forward pass.
	BatchSize prometheus.Observer
	// QueueWait observes, for each request, the seconds from its arrival
	// to the start of the forward pass that answered it.
	QueueWait prometheus.Observer
	// Forward observes the seconds of each forward pass.
	Forward prometheus.Observer
	Version prometheus.Gauge
}

// Trainer is what a trainer records.
type Trainer struct {
	Samples      prometheus.Counter
	DroppedStale prometheus.Counter
	Updates      prometheus.Counter
	Episodes     prometheus.Counter
	Return       prometheus.Gauge
	Checkpoints  prometheus.Counter
	// PolicyLag observes, for each batch trained on, the versions its
	// parameters were behind.
	PolicyLag prometheus.Observer
	Version   prometheus.Gauge
	// GroupReforms and AllreduceSeconds are a data-parallel group's
	// member's: its group's breaks, and its time in all-reduces.
	GroupReforms, AllreduceSeconds prometheus.Counter
	// UpdateSeconds and LoopSeconds are the learner's time in updates and
	// the loop's outside them: what bounds the trainer.
	UpdateSeconds, LoopSeconds prometheus.Counter

	w      *Worker
	mu     sync.Mutex
	losses map[string]prometheus.Gauge
}

// Loss sets the trainer's last value of one of its losses (name: policy,
// value, entropy, approx_kl, td, mean_q, ...: a fixed set per algorithm).
// Each name's series is looked up once.
func (t *Trainer) Loss(name string, v float64) {
	t.mu.Lock()
	g, ok := t.losses[name]
	if !ok {
		g = t.w.r.loss.WithLabelValues(append(t.w.labels[:len(t.w.labels):len(t.w.labels)], name)...)
		t.losses[name] = g
	}
	t.mu.Unlock()
	g.Set(v)
}

// Sink is what a sink records.
type Sink struct {
	Samples  prometheus.Counter
	Episodes prometheus.Counter
}

// ReplayTable is what a replay worker records of one table.
type ReplayTable struct {
	Items        prometheus.Gauge
	Inserts      prometheus.Counter
	Samples      prometheus.Counter
	LimiterWaits prometheus.Counter
}

// Actor returns the worker's actor part, made at the first call.
func (w *Worker) Actor() *Actor {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.actor == nil {
		r, l := w.r, w.labels
		w.actor = &Actor{
			EnvSteps: r.envSteps.WithLabelValues(l...), Episodes: r.episodes.WithLabelValues(l...),
			Return: r.episodeReturn.WithLabelValues(l...), InferenceFailures: r.inferFailures.WithLabelValues(l...),
			Backpressured: r.backpressured.WithLabelValues(l...),
		}
	}
	return w.actor
}

// Policy returns the worker's policy part, made at the first call.
func (w *Worker) Policy() *Policy {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.policy == nil {
		r, l := w.r, w.labels
		w.policy = &Policy{
			BatchSize: r.batchSize.WithLabelValues(l...), QueueWait: r.queueWait.WithLabelValues(l...),
			Forward: r.forward.WithLabelValues(l...), Version: r.version.WithLabelValues(l...),
		}
	}
	return w.policy
}

// Trainer returns the worker's trainer part, made at the first call.
func (w *Worker) Trainer() *Trainer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.trainer == nil {
		r, l := w.r, w.labels
		w.trainer = &Trainer{
			Samples: r.samplesTrained.WithLabelValues(l...), DroppedStale: r.droppedStale.WithLabelValues(l...),
			Updates: r.updates.WithLabelValues(l...), Episodes: r.episodes.WithLabelValues(l...),
			Return: r.episodeReturn.WithLabelValues(l...), Checkpoints: r.checkpoints.WithLabelValues(l...),
			PolicyLag: r.policyLag.WithLabelValues(l...), Version: r.version.WithLabelValues(l...),
			GroupReforms: r.groupReforms.WithLabelValues(l...), AllreduceSeconds: r.allreduceSecs.WithLabelValues(l...),
			UpdateSeconds: r.updateSecs.WithLabelValues(l...), LoopSeconds: r.loopSecs.WithLabelValues(l...),
			w: w, losses: map[string]prometheus.Gauge{},
		}
	}
	return w.trainer
}

// Sink returns the worker's sink part, made at the first call.
func (w *Worker) Sink() *Sink {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sink == nil {
		r, l := w.r, w.labels
		w.sink = &Sink{Samples: r.sinkSamples.WithLabelValues(l...), Episodes: r.episodes.WithLabelValues(l...)}
	}
	return w.sink
}

// ReplayTable returns the part of the replay worker's table name, made at
// the first call.
func (w *Worker) ReplayTable(name string) *ReplayTable {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.replay[name]
	if !ok {
		r, l := w.r, append(w.labels[:len(w.labels):len(w.labels)], name)
		t = &ReplayTable{
			Items: r.replayItems.WithLabelValues(l...), Inserts: r.replayInserts.WithLabelValues(l...),
			Samples: r.replaySamples.WithLabelValues(l...), LimiterWaits: r.limiterWaits.WithLabelValues(l...),
		}
		w.replay[name] = t
	}
	return t
}
