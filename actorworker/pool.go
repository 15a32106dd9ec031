package actorworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
)

// Defaults of PoolMapping.
const (
	DefaultPoolTag       = "pool"
	DefaultPoolTimeoutMs = 30000
	// poolNetworks is how many versions' networks a pool keeps built: the
	// pool's members and a few drawn before a newer version pushed them
	// out, still finishing their episodes.
	poolNetworksSpare = 4
)

// PoolMapping makes a mapping's agents play kept versions of a policy
// (paramstream.Versions), one drawn per agent per episode uniformly from
// the newest Last versions tagged Tag: the opponents of a self-play
// trial. The networks run inline, in the actor.
type PoolMapping struct {
	// Policy is whose kept versions; default the mapping's policy.
	Policy string `msgpack:"policy"`
	Tag    string `msgpack:"tag"`
	Last   int    `msgpack:"last"`
	// TimeoutMs bounds how long configure waits for the pool's first
	// version (a trainer keeps its version 0 when it starts).
	TimeoutMs int `msgpack:"timeout_ms"`
}

// check fills in the defaults of p, the pool of the mapping of policy.
func (p *PoolMapping) check(where, policy string) error {
	p.Policy = cmp.Or(p.Policy, policy)
	p.Tag = cmp.Or(p.Tag, DefaultPoolTag)
	p.TimeoutMs = cmp.Or(p.TimeoutMs, DefaultPoolTimeoutMs)
	if p.Last < 1 || p.TimeoutMs < 1 {
		return badConfig("%spool: last %d, timeout_ms %d: want both >= 1", where, p.Last, p.TimeoutMs)
	}
	if err := paramstream.CheckTag(p.Tag); err != nil {
		return badConfig("%spool: %v", where, err)
	}
	return nil
}

// poolInference is the inference of a pool mapping: a network per kept
// version in play, each an inline client, and a slot per agent that
// draws its version at each episode's start. The worker polls and
// flushes it as any client; the agents post through their slots.
type poolInference struct {
	spec   PoolMapping
	reader *paramstream.KeptReader
	build  func() (*policy.ActorCritic, error) // a network of the mapping's shape
	obsDim int
	rng    *rand.Rand
	nets   map[int64]*poolNet
	order  []int64 // nets' keys, oldest built first
	draws  int64
	byDraw map[int64]int64
}

// poolNet is one kept version's network and the requests posted to it.
type poolNet struct {
	epoch  uint64
	client *stream.InlineInferenceClient
	slots  int // slots playing it
}

// newPoolInference opens the pool of spec and waits, up to its timeout,
// for its first member.
func newPoolInference(ctx context.Context, r *paramstream.KeptReader, spec PoolMapping, seed int64, obsDim int,
	build func() (*policy.ActorCritic, error)) (*poolInference, error) {
	p := &poolInference{spec: spec, reader: r, build: build, obsDim: obsDim,
		rng: rand.New(rand.NewPCG(uint64(seed), 0x9001)), nets: map[int64]*poolNet{}, byDraw: map[int64]int64{}}
	pool := paramstream.PoolSpec{Tag: spec.Tag, Last: spec.Last}
	timeout := time.Duration(spec.TimeoutMs) * time.Millisecond
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(pool.Members(r.Versions())) == 0 {
		select {
		case <-wait.Done():
			return nil, rpc.Errorf(rpc.ErrTypeBadArguments, "actor config: pool of policy %s: no version tagged %q after %v (timeout_ms): %d versions of it kept",
				spec.Policy, spec.Tag, timeout, len(r.Versions()))
		case <-tick.C:
		}
	}
	return p, nil
}

// draw picks the version an episode plays and returns its network, built
// (and its parameters loaded) if it is not yet.
func (p *poolInference) draw() (*poolNet, int64, error) {
	v, err := paramstream.PoolSpec{Tag: p.spec.Tag, Last: p.spec.Last}.Draw(p.reader.Versions(), p.rng)
	if err != nil {
		return nil, 0, err // members collected meanwhile; the caller keeps its network
	}
	p.draws++
	p.byDraw[v.Version]++
	if n, ok := p.nets[v.Version]; ok && n.epoch == v.Epoch {
		return n, v.Version, nil
	}
	data, err := p.reader.Load(v)
	if err != nil {
		return nil, 0, err
	}
	pol, err := p.build()
	if err != nil {
		return nil, 0, err
	}
	if err := pol.SetParams(v.Version, data); err != nil {
		return nil, 0, fmt.Errorf("pool: version %d of %s: %w", v.Version, p.spec.Policy, err)
	}
	n := &poolNet{epoch: v.Epoch, client: stream.NewInlineInferenceClient(pol, p.obsDim)}
	p.nets[v.Version] = n
	p.order = append(p.order, v.Version)
	p.prune()
	return n, v.Version, nil
}

// prune drops the oldest networks no slot plays, past the pool's size and
// a few spare.
func (p *poolInference) prune() {
	for i := 0; len(p.nets) > p.spec.Last+poolNetworksSpare && i < len(p.order); {
		v := p.order[i]
		if n := p.nets[v]; n.slots == 0 {
			delete(p.nets, v)
			p.order = append(p.order[:i], p.order[i+1:]...)
			continue
		}
		i++
	}
}

// slot returns a new agent's client of the pool.
func (p *poolInference) slot() *poolSlot { return &poolSlot{pool: p} }

// errPoolSlotsOnly: the pool's own client is polled and flushed by the
// worker; the agents post through their slots.
var errPoolSlotsOnly = errors.New("actorworker: pool inference: post through an agent's slot")

func (p *poolInference) Post([]float32) (stream.ReqID, error) { return 0, errPoolSlotsOnly }
func (p *poolInference) Ready(stream.ReqID) bool              { return false }
func (p *poolInference) Consume(stream.ReqID) (stream.InferenceResult, error) {
	return stream.InferenceResult{}, errPoolSlotsOnly
}
func (p *poolInference) Poll() error         { return nil }
func (p *poolInference) Warning() string     { return "" }
func (p *poolInference) Socket() *zmq.Socket { return nil }
func (p *poolInference) Close() error        { return p.reader.Close() }

// Flush answers the requests posted to every version's network.
func (p *poolInference) Flush(ctx context.Context) error {
	for _, n := range p.nets {
		if err := n.client.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stats are the pool's draws, for the actor's policies stat.
func (p *poolInference) stats() map[string]any {
	by := make(map[string]int64, len(p.byDraw))
	for v, n := range p.byDraw {
		by[strconv.FormatInt(v, 10)] = n
	}
	return map[string]any{"pool_draws": p.draws, "pool_draws_by_version": by, "pool_networks": len(p.nets)}
}

// poolSlot is one agent's client of a pool: the network of the version
// drawn for its episode. A request is answered by the network it was
// posted to, whatever the next episode draws.
type poolSlot struct {
	pool    *poolInference
	net     *poolNet
	version int64
	posted  *poolNet
}

var _ episodeStarter = (*poolSlot)(nil)

// startEpisode draws the version the agent plays this episode. A draw
// that fails (the pool's versions collected, a file unreadable) keeps the
// version it has.
func (s *poolSlot) startEpisode() error {
	n, v, err := s.pool.draw()
	if err != nil {
		if s.net != nil {
			return nil
		}
		return fmt.Errorf("pool of policy %s: %w", s.pool.spec.Policy, err)
	}
	if s.net != nil {
		s.net.slots--
	}
	s.net, s.version = n, v
	n.slots++
	return nil
}

func (s *poolSlot) Post(obs []float32) (stream.ReqID, error) {
	if s.net == nil {
		if err := s.startEpisode(); err != nil {
			return 0, err
		}
	}
	s.posted = s.net
	return s.net.client.Post(obs)
}

func (s *poolSlot) Ready(id stream.ReqID) bool { return s.posted != nil && s.posted.client.Ready(id) }

func (s *poolSlot) Consume(id stream.ReqID) (stream.InferenceResult, error) {
	if s.posted == nil {
		return stream.InferenceResult{}, errPoolSlotsOnly
	}
	return s.posted.client.Consume(id)
}

// The worker polls and flushes the pool itself.
func (s *poolSlot) Flush(context.Context) error { return nil }
func (s *poolSlot) Poll() error                 { return nil }
func (s *poolSlot) Warning() string             { return "" }
func (s *poolSlot) Socket() *zmq.Socket         { return nil }
func (s *poolSlot) Close() error                { return nil }

// episodeStarter is a client that wants to know when its agent's episode
// starts (a pool's slot draws its version then).
type episodeStarter interface {
	startEpisode() error
}
