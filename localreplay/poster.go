package localreplay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/vmihailenco/msgpack/v5"
)

// PosterOptions configure a Poster.
type PosterOptions struct {
	Repo  nameresolve.Repository
	Trial names.Trial
	// Curve is the trial's key pair when it runs with CURVE (nil: not).
	Curve *rpc.CurveKeyPair
	// Stream and Table name the replay stream and table (default
	// "default" both).
	Stream, Table string
	// Gamma, NStep and Lambda: the returns (see Config).
	Gamma  float64
	NStep  int
	Lambda float64
	// MaxOutbox bounds the transitions waiting to be sent (default 2048:
	// little, so that the replay's rate limiter holds actors back
	// promptly); MaxInFlight the insert requests awaiting a reply
	// (default 4); Chunk the transitions per insert (default 256).
	MaxOutbox, MaxInFlight, Chunk int
	// TimeoutMs: how long the replay may hold an insert back (default
	// 10000).
	TimeoutMs int64
}

// PosterStats are a Poster's counts.
type PosterStats struct {
	Batches  int64 `json:"batches"`
	Inserted int64 `json:"inserted"`
	// Dropped: transitions dropped, oldest first, while no replay server
	// was there to take them. Failed: transitions of inserts the replay
	// refused or did not answer.
	Dropped int64 `json:"dropped"`
	Failed  int64 `json:"failed"`
	Outbox  int   `json:"outbox"`
}

type outItem struct {
	priority float64
	data     []byte
}

// Poster is an actor's way into the replay (Ape-X): a stream.SamplePoster
// that turns each sample batch into transitions with n-step returns and
// initial priorities (a Memory) and inserts them into the replay's shards,
// pipelined. It is for the actor's loop goroutine.
//
// A batch ends where the actor cut it; the observation after its last step
// is not in it. Each episode in it (or part of one) goes to the memory on
// its own (see segment for what it gives). The initial priority of a step
// is |G^n - V(s_t)| with the batch's value estimates (the value head of a
// dueling Q network: V(s) ≈ max_a Q(s, a)).
//
// Back-pressure: with MaxInFlight inserts unanswered (the replay's rate
// limiter holds them, or it is slow) and the outbox full, Post refuses the
// batch (stream.ErrBackpressure) and the actor waits. With no replay
// server at all (it died), the oldest transitions are dropped, counted,
// and the actor goes on; it resumes sending when a server registers.
type Poster struct {
	opts    PosterOptions
	client  *replaystream.Client
	mem     *Memory
	outbox  []outItem
	st      PosterStats
	lastErr string
	sent    map[int64]int // transitions of each unanswered insert
}

var _ stream.SamplePoster = (*Poster)(nil)

// NewPoster connects to the replay stream.
func NewPoster(ctx context.Context, o PosterOptions) (*Poster, error) {
	o.Stream = cmp.Or(o.Stream, replaystream.DefaultName)
	o.Table = cmp.Or(o.Table, "default")
	o.NStep = cmp.Or(o.NStep, 1)
	o.MaxOutbox = cmp.Or(o.MaxOutbox, 2048)
	o.MaxInFlight = cmp.Or(o.MaxInFlight, 4)
	o.Chunk = cmp.Or(o.Chunk, 256)
	o.TimeoutMs = cmp.Or(o.TimeoutMs, 10000)
	c, err := replaystream.NewClient(ctx, replaystream.ClientOptions{Repo: o.Repo, Trial: o.Trial, Name: o.Stream, Curve: o.Curve})
	if err != nil {
		return nil, err
	}
	return &Poster{opts: o, client: c, sent: map[int64]int{}}, nil
}

// Post turns b into transitions and sends what it can. It refuses b
// (stream.ErrBackpressure) only while the replay is there but not keeping
// up, and then b is not used: the actor keeps it and posts it again. It
// never blocks and does not keep b's arrays.
func (p *Poster) Post(b *api.SampleBatch) error {
	p.pump()
	// With a replay there, a batch goes in whole or waits: the outbox
	// takes it if it fits, or if the outbox is empty (a batch longer than
	// the outbox must go in some time). Trimming here instead once
	// dropped about half of every Ape-X actor's transitions, because the
	// replay's rate limiter keeps the outbox near full.
	replayUp := len(p.client.Shards()) > 0
	if replayUp && len(p.outbox) > 0 && len(p.outbox)+b.Len() > p.opts.MaxOutbox {
		return stream.ErrBackpressure
	}
	if err := p.convert(b); err != nil {
		return err
	}
	p.st.Batches++
	if over := len(p.outbox) - p.opts.MaxOutbox; over > 0 && !replayUp {
		p.st.Dropped += int64(over)
		p.outbox = p.outbox[over:]
	}
	p.flush()
	return nil
}

// convert appends b's transitions to the outbox. A batch may hold the end
// of the episode an earlier batch began, whole episodes, and the start of
// one that goes on: each goes to the memory as an episode of its own, cut
// after every step that terminated or was truncated.
func (p *Poster) convert(b *api.SampleBatch) error {
	T := b.Len()
	if T == 0 {
		return nil
	}
	if b.Actions.Len() != T || b.Values.Len() != T || b.Obs.Len()%T != 0 ||
		b.Terminated.Len() != T || b.Truncated.Len() != T {
		return fmt.Errorf("localreplay: batch of %d steps with %d actions, %d values, %d terminated and %d truncated flags, %d obs values: want discrete actions, values and flags",
			T, b.Actions.Len(), b.Values.Len(), b.Terminated.Len(), b.Truncated.Len(), b.Obs.Len())
	}
	d := b.Obs.Len() / T
	// The transitions keep the shape of an image observation. They are
	// not stacked: each segment is an episode of its own to the memory, so
	// a stack would repeat a batch's first frame where the trajectory goes
	// on from the previous batch.
	var shape []int
	if len(b.Obs.Shape) > 2 {
		shape = b.Obs.Shape[1:]
	}
	if p.mem == nil || p.mem.cfg.FrameSize != d || !slices.Equal(p.mem.cfg.FrameShape, shape) || p.mem.cfg.MaxTransitions < T {
		m, err := New(Config{FrameSize: d, FrameShape: slices.Clone(shape), Gamma: p.opts.Gamma, NStep: p.opts.NStep, Lambda: p.opts.Lambda,
			MaxTransitions: max(T+1, 4096), MaxEpisodes: 2})
		if err != nil {
			return err
		}
		p.mem = m
	}
	for start := 0; start < T; {
		end := start + 1
		for end < T && b.Terminated.Data[end-1] == 0 && b.Truncated.Data[end-1] == 0 {
			end++
		}
		if err := p.segment(b, d, start, end); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// segment gives the memory steps [start, end) of b, which end its episode
// or the batch, and moves their transitions to the outbox. A segment that
// ends in a termination gives every step; one that ends otherwise gives all
// but its last step, whose successor is not in the batch, and its returns
// bootstrap from the last step's observation (its value estimate).
func (p *Poster) segment(b *api.SampleBatch, d, start, end int) error {
	obs := func(t int) []float32 { return b.Obs.Data[t*d : (t+1)*d] }
	ep, err := p.mem.Open(obs(start))
	if err != nil {
		return err
	}
	terminated := b.Terminated.Data[end-1] != 0
	last := end - 1 // the steps kept end before it
	if terminated {
		last = end
	}
	for t := start; t < last; t++ {
		next := obs(min(t+1, end-1)) // a terminal step's successor is never used
		v := b.Values.Data[t]
		if err := p.mem.Step(ep, Step{Action: b.Actions.Data[t], Reward: []float32{b.Rewards.Data[t]}, Value: v, Estimate: v, Frame: next}); err != nil {
			return err
		}
	}
	if err := p.mem.Close(ep, terminated, b.Values.Data[end-1]); err != nil {
		return err
	}
	// Taken at once: the memory keeps only its newest MaxEpisodes for
	// TakeNew, and a batch may hold more episodes than that.
	for _, it := range p.mem.TakeNew() {
		data, err := msgpack.Marshal(&it.Transition)
		if err != nil {
			return fmt.Errorf("localreplay: encode transition: %w", err)
		}
		p.outbox = append(p.outbox, outItem{priority: float64(it.Priority), data: data})
	}
	return nil
}

// flush sends the outbox in chunks while fewer than MaxInFlight inserts
// are unanswered.
func (p *Poster) flush() {
	for len(p.outbox) > 0 && p.client.Pending() < p.opts.MaxInFlight {
		n := min(len(p.outbox), p.opts.Chunk)
		req := &replaystream.Request{Op: replaystream.OpInsert, Table: p.opts.Table, TimeoutMs: p.opts.TimeoutMs,
			Items: make([][]byte, n), Priorities: api.Tensor[float64]{Shape: []int{n}, Data: make([]float64, n)}}
		for i, it := range p.outbox[:n] {
			req.Items[i], req.Priorities.Data[i] = it.data, it.priority
		}
		rid, err := p.client.Send(-1, req)
		if err != nil {
			return // not connected yet, or gone: the outbox waits
		}
		p.sent[rid] = n
		p.outbox = p.outbox[n:]
	}
}

// pump takes the replies that have arrived.
func (p *Poster) pump() {
	reps, err := p.client.Poll()
	if err != nil {
		p.lastErr = err.Error()
	}
	for _, r := range reps {
		n := int64(p.sent[r.RID])
		delete(p.sent, r.RID)
		if r.Error != nil {
			p.st.Failed += n
			p.lastErr = r.Error.Error()
			continue
		}
		p.st.Inserted += n
	}
}

// Flush takes replies and sends what waits; the actor's loop may call it
// between posts.
func (p *Poster) Flush() {
	p.pump()
	p.flush()
}

// Buffered is the number of transitions in the outbox, not sent yet.
func (p *Poster) Buffered() int { return len(p.outbox) }

// Stats returns the poster's counts.
func (p *Poster) Stats() PosterStats {
	s := p.st
	s.Outbox = len(p.outbox)
	return s
}

// Warning says why transitions are not getting through, if they are not.
func (p *Poster) Warning() string {
	switch {
	case len(p.client.Shards()) == 0:
		return "no replay server registered; transitions wait (oldest dropped beyond the outbox)"
	case p.lastErr != "":
		return "replay: " + p.lastErr
	}
	return ""
}

// Close closes the client; unsent transitions are dropped.
func (p *Poster) Close() error {
	return errors.Join(p.client.Close())
}
