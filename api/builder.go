package api

import (
	"fmt"
	"math"
	"slices"
)

// StepRecord is one step of an agent's trajectory, as [SampleBuilder.Append]
// takes it.
type StepRecord struct {
	// Obs is the observation the action was chosen from. Append copies it.
	Obs        []float32
	Action     Action
	Reward     float32
	Terminated bool
	Truncated  bool
	LogProb    float32
	Value      float32
	// Version is the version of the policy that chose the action.
	Version int64
}

// SampleBuilder accumulates one agent's steps and cuts them into
// SampleBatches. It also tracks the running episode across batches, so each
// batch reports the full return and length of the episodes that end in it.
//
// A SampleBuilder is not safe for concurrent use.
type SampleBuilder struct {
	// Policy, ActorID and AgentID are copied into every batch built.
	Policy, ActorID, AgentID string

	obsDim, actDim, capacity int
	obsShape                 []int // nil: [obsDim]

	obs, cont, rewards, logProbs, values []float32
	actions                              []int32
	term, trunc                          []uint8
	episodes                             []EpisodeStat
	// The oldest and the newest policy version of the steps since the
	// last Build.
	minVersion, maxVersion int64

	epReturn float32
	epLen    int32

	ready    bool        // the buffers for the current batch are allocated
	spare    SampleBatch // buffers given back by Recycle, while hasSpare
	hasSpare bool
}

// NewSampleBuilder returns a builder for observations of obsDim floats and
// actions of actDim floats, or discrete actions when actDim is 0. capacity
// is the expected number of steps per batch: buffers are preallocated to it
// (and grow past it if needed).
func NewSampleBuilder(obsDim, actDim, capacity int) (*SampleBuilder, error) {
	if obsDim < 1 || actDim < 0 || capacity < 0 {
		return nil, fmt.Errorf("api: NewSampleBuilder(obsDim=%d, actDim=%d, capacity=%d): invalid arguments", obsDim, actDim, capacity)
	}
	if _, err := numElements([]int{capacity, max(obsDim, actDim)}, 4); err != nil {
		return nil, fmt.Errorf("api: NewSampleBuilder: %w", err)
	}
	return &SampleBuilder{obsDim: obsDim, actDim: actDim, capacity: capacity, minVersion: math.MaxInt64, maxVersion: math.MinInt64}, nil
}

// allocate gives the builder empty buffers for the current batch, taking
// the recycled ones when there are. It runs at the first Append of a batch,
// not in Build, so that a batch recycled right after Build is reused at once.
func (b *SampleBuilder) allocate() {
	b.ready = true
	if b.hasSpare {
		s := &b.spare
		b.hasSpare = false
		b.obs, b.rewards = s.Obs.Data[:0], s.Rewards.Data[:0]
		b.actions, b.cont = s.Actions.Data[:0], s.ContActions.Data[:0]
		b.term, b.trunc = s.Terminated.Data[:0], s.Truncated.Data[:0]
		b.logProbs, b.values = s.LogProbs.Data[:0], s.Values.Data[:0]
		return
	}
	c := b.capacity
	b.obs = make([]float32, 0, c*b.obsDim)
	if b.actDim == 0 {
		b.actions, b.cont = make([]int32, 0, c), nil
	} else {
		b.actions, b.cont = nil, make([]float32, 0, c*b.actDim)
	}
	b.rewards = make([]float32, 0, c)
	b.term = make([]uint8, 0, c)
	b.trunc = make([]uint8, 0, c)
	b.logProbs = make([]float32, 0, c)
	b.values = make([]float32, 0, c)
}

// Len returns the number of steps appended since the last Build.
func (b *SampleBuilder) Len() int { return len(b.rewards) }

// Episodes returns the episodes that ended in the steps appended since the
// last Build, in order (the batch's Episodes so far). The slice is the
// builder's: valid until the next Append or Build.
func (b *SampleBuilder) Episodes() []EpisodeStat { return b.episodes }

// Append adds one step. It rejects a step whose observation or continuous
// action has the wrong length, leaving the builder unchanged.
func (b *SampleBuilder) Append(r StepRecord) error {
	if len(r.Obs) != b.obsDim {
		return fmt.Errorf("api: SampleBuilder.Append: observation has %d values, want %d", len(r.Obs), b.obsDim)
	}
	if b.actDim > 0 && len(r.Action.Continuous) != b.actDim {
		return fmt.Errorf("api: SampleBuilder.Append: continuous action has %d values, want %d", len(r.Action.Continuous), b.actDim)
	}
	if !b.ready {
		b.allocate()
	}
	b.obs = append(b.obs, r.Obs...)
	if b.actDim == 0 {
		b.actions = append(b.actions, r.Action.Discrete)
	} else {
		b.cont = append(b.cont, r.Action.Continuous...)
	}
	b.rewards = append(b.rewards, r.Reward)
	b.term = append(b.term, boolByte(r.Terminated))
	b.trunc = append(b.trunc, boolByte(r.Truncated))
	b.logProbs = append(b.logProbs, r.LogProb)
	b.values = append(b.values, r.Value)
	b.minVersion, b.maxVersion = min(b.minVersion, r.Version), max(b.maxVersion, r.Version)

	b.epReturn += r.Reward
	b.epLen++
	if r.Terminated || r.Truncated {
		b.episodes = append(b.episodes, EpisodeStat{Return: b.epReturn, Length: b.epLen})
		b.epReturn, b.epLen = 0, 0
	}
	return nil
}

// NewestVersion returns the newest policy version among the steps
// appended since the last Build, and false if there are none.
func (b *SampleBuilder) NewestVersion() (int64, bool) {
	return b.maxVersion, len(b.rewards) > 0
}

// Build returns the steps appended since the last Build as a batch and
// starts a new one. bootstrapValue is the value estimate of the observation
// after the last step; it is ignored (0) if the last step terminated.
//
// The batch owns its arrays: the builder continues in fresh (or recycled)
// arrays, so the batch stays valid however the builder is used afterwards.
func (b *SampleBuilder) Build(bootstrapValue float32) SampleBatch {
	n := len(b.rewards)
	if n > 0 && b.term[n-1] == 1 {
		bootstrapValue = 0
	}
	version := b.minVersion
	if n == 0 {
		version = 0
	}
	batch := SampleBatch{
		Policy:         b.Policy,
		PolicyVersion:  version,
		Obs:            NewFrames(Tensor[float32]{Shape: b.batchObsShape(n), Data: b.obs}),
		Rewards:        Tensor[float32]{Shape: []int{n}, Data: b.rewards},
		Terminated:     Tensor[uint8]{Shape: []int{n}, Data: b.term},
		Truncated:      Tensor[uint8]{Shape: []int{n}, Data: b.trunc},
		LogProbs:       Tensor[float32]{Shape: []int{n}, Data: b.logProbs},
		Values:         Tensor[float32]{Shape: []int{n}, Data: b.values},
		BootstrapValue: bootstrapValue,
		Episodes:       b.episodes,
		ActorID:        b.ActorID,
		AgentID:        b.AgentID,
	}
	if b.actDim == 0 {
		batch.Actions = Tensor[int32]{Shape: []int{n}, Data: b.actions}
	} else {
		batch.ContActions = Tensor[float32]{Shape: []int{n, b.actDim}, Data: b.cont}
	}
	if !b.ready { // no step since the last Build: empty, non-nil arrays
		batch.Obs.Data, batch.Rewards.Data = []float32{}, []float32{}
		batch.Terminated.Data, batch.Truncated.Data = []uint8{}, []uint8{}
		batch.LogProbs.Data, batch.Values.Data = []float32{}, []float32{}
		if b.actDim == 0 {
			batch.Actions.Data = []int32{}
		} else {
			batch.ContActions.Data = []float32{}
		}
	}
	// Hand the arrays over; the next Append allocates or takes recycled ones.
	b.obs, b.cont, b.rewards, b.logProbs, b.values = nil, nil, nil, nil, nil
	b.actions, b.term, b.trunc, b.episodes = nil, nil, nil, nil
	b.minVersion, b.maxVersion = math.MaxInt64, math.MinInt64
	b.ready = false
	return batch
}

// SetObsShape gives the shape of one observation, whose product must be
// the builder's obsDim: batches then carry observations of shape
// [T, shape...] instead of [T, obsDim], so that an image keeps its
// [H, W, C] on its way to a learner. Batches built before keep theirs.
func (b *SampleBuilder) SetObsShape(shape ...int) error {
	n, err := numElements(shape, 4)
	if err != nil || len(shape) == 0 || len(shape) >= MaxRank || n != b.obsDim {
		return fmt.Errorf("api: SampleBuilder.SetObsShape(%v): want a shape of %d values", shape, b.obsDim)
	}
	b.obsShape = slices.Clone(shape)
	return nil
}

// batchObsShape is the shape of n observations.
func (b *SampleBuilder) batchObsShape(n int) []int {
	if b.obsShape == nil {
		return []int{n, b.obsDim}
	}
	return append([]int{n}, b.obsShape...)
}

// Recycle gives a batch's arrays back to the builder for reuse, sparing an
// allocation per batch. Call it only once nothing uses the batch any more
// (typically after it has been serialised); the builder will overwrite its
// arrays. Batches from another builder, or of another layout, are ignored.
func (b *SampleBuilder) Recycle(batch SampleBatch) {
	c := b.capacity
	fits := cap(batch.Obs.Data) >= c*b.obsDim && cap(batch.Rewards.Data) >= c &&
		cap(batch.Terminated.Data) >= c && cap(batch.Truncated.Data) >= c &&
		cap(batch.LogProbs.Data) >= c && cap(batch.Values.Data) >= c
	if b.actDim == 0 {
		fits = fits && cap(batch.Actions.Data) >= c && batch.ContActions.IsZero()
	} else {
		fits = fits && cap(batch.ContActions.Data) >= c*b.actDim && batch.Actions.IsZero()
	}
	if fits {
		// Kept by value: a pointer to batch would move every batch
		// recycled to the heap.
		b.spare, b.hasSpare = batch, true
	}
}

func boolByte(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}
