package actorworker

import (
	"context"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/stream"
)

// Ring growth. A ring of R environments has at most R requests in flight,
// so an actor steps at most R environments per round trip to its policy
// worker. Between processes of one node that is tens of microseconds over
// shared memory and the ring is sized for it; when the policy worker is on
// another node the round trip is the network's (0.6-1.4 ms between the
// nodes of the 3-node test cluster, against about 45 us locally), and
// cartpole-ppo's rings of 2 stepped at a fifth to a third of their local
// rate. The
// actor therefore grows its ring while it is bound by the round trip: once
// per RingGrowEvery, if it waited for actions for BoundShare of that time
// or more and its consumers refused none of its batches, it doubles its
// environments, up to ring_max. It never shrinks: the environments it
// added are in the middle of episodes, and a ring that stops being
// inference-bound stops growing.
//
// Over shared memory the ring does not grow unless ring_max says so: a
// local actor that waits for actions waits for a policy worker that shares
// its cores, and more environments there make more steps than the trainer
// can take (cartpole-ppo with rings of 16: 2.6x the steps/s of rings of 2,
// and the same time to 475).

const (
	// RingGrowEvery is how often the actor decides whether to grow.
	RingGrowEvery = 250 * time.Millisecond
	// AutoRingGrowth is ring_max over ring_size when ring_max is unset and
	// the policy workers are on other nodes.
	AutoRingGrowth = 16
)

// growth is what the actor measured since the last decision.
type growth struct {
	from   time.Time     // the period's start; zero before the first poll
	waited time.Duration // waiting for actions, while not back-pressured
	held   bool          // a batch was refused
	failed bool          // growing failed once: never again
}

// ringMax is the most environments the ring may have now (see RingMax).
//
// With several policies (the agents key) the ring grows only while every
// one of them is remote and reached over the network: a target steps once
// all its agents have their actions, so one slow remote policy would make
// the actor wait, but an inline policy or a policy worker over shared
// memory computes on this node's cores, which more environments would
// take from it (the reason a single local policy does not grow the ring).
func (w *Worker) ringMax() int {
	if w.ring == nil {
		return 0
	}
	if w.cfg.RingMax > 0 {
		return w.cfg.RingMax
	}
	remote := w.remoteClients()
	grow := len(remote) > 0 && len(remote) == len(w.clients)
	for _, c := range remote {
		// Only a client that has had replies, and none over shared
		// memory, knows that its round trip is the network's.
		grow = grow && c.SharedMemoryServers() == 0 && c.Stats().RoundTrip > 0
	}
	if !grow {
		return max(w.cfg.RingSize, w.ring.Len())
	}
	return max(AutoRingGrowth*w.cfg.RingSize, w.ring.Len())
}

// maybeGrow decides, once per RingGrowEvery, whether the last period was
// bound by the round trip, and if so grows the ring.
func (w *Worker) maybeGrow(ctx context.Context, now time.Time) error {
	g := &w.growth
	span := now.Sub(g.from)
	if g.from.IsZero() || span < RingGrowEvery {
		return nil
	}
	waited, held := g.waited, g.held
	g.from, g.waited, g.held = now, 0, false
	n, limit := w.ring.Len(), w.ringMax()
	if g.failed || held || w.draining || n >= limit || float64(waited) < BoundShare*float64(span) {
		return nil
	}
	return w.grow(ctx, min(n, limit-n), float64(waited)/float64(span))
}

// grow adds n environments to the ring, started at once. Environments that
// cannot be made (a Python host that does not start) end the growth, not
// the actor: it carries on with the ring it has.
func (w *Worker) grow(ctx context.Context, n int, waited float64) error {
	from := w.ring.Len()
	giveUp := func(err error) error {
		w.growth.failed = true
		w.log.Warn("actor: cannot grow the ring; keeping it as it is", "ring_size", from, "err", err)
		return nil
	}
	more, err := api.NewEnvBatch(ctx, w.cfg.Env, w.cfg.EnvConfig, n, w.log)
	if err != nil {
		return giveUp(err)
	}
	batch, err := api.AppendBatch(w.batch, more)
	if err != nil {
		_ = more.Close()
		return giveUp(err)
	}
	targets, err := w.newTargets(batch, w.cfg, from)
	if err != nil {
		_ = more.Close()
		return err
	}
	w.batch = batch
	w.ring.Add(targets...)
	if w.cfg.pollStepsAuto {
		w.cfg.MaxPollSteps = max(w.cfg.MaxPollSteps, w.ring.Len())
	}
	cs, _ := w.inferenceStats()
	rtt := cs.RoundTrip
	w.log.Info("actor: ring grown: it waited for actions most of the time", "from", from, "to", w.ring.Len(),
		"ring_max", w.ringMax(), "waited_pct", int(waited*100), "round_trip", rtt.Round(time.Microsecond).String())
	return w.startTargets(ctx, targets)
}

// remoteClient is what the actor reads of a remote inference client: its
// statistics, and how many of its servers it reaches over shared memory.
type remoteClient interface {
	Stats() stream.InferenceClientStats
	SharedMemoryServers() int
}

// remoteClients are the actor's remote inference clients (none with
// inline inference).
func (w *Worker) remoteClients() []remoteClient {
	var out []remoteClient
	for _, c := range w.clients {
		if c, ok := c.(remoteClient); ok {
			out = append(out, c)
		}
	}
	return out
}

// inferenceStats are the remote inference clients' statistics, summed
// over the policies, except RoundTrip, the longest: the round trip a
// target, which waits for all its agents, waits for. False with inline
// inference only.
func (w *Worker) inferenceStats() (stream.InferenceClientStats, bool) {
	remote := w.remoteClients()
	var s stream.InferenceClientStats
	for _, c := range remote {
		cs := c.Stats()
		s.Posted += cs.Posted
		s.Messages += cs.Messages
		s.Bytes += cs.Bytes
		s.SharedMemory += cs.SharedMemory
		s.SameProcess += cs.SameProcess
		s.Replies += cs.Replies
		s.RoundTrip = max(s.RoundTrip, cs.RoundTrip)
		s.Failed += cs.Failed
		s.Late += cs.Late
		s.Malformed += cs.Malformed
		s.Refused += cs.Refused
	}
	return s, len(remote) > 0
}
