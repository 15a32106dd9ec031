package localreplay

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/replay"
)

// Config configures a Memory.
type Config struct {
	// FrameSize is the number of floats in one frame (one observation
	// without stacking).
	FrameSize int `msgpack:"frame_size" json:"frame_size"`
	// FrameStack is how many frames make an observation (1: none). The
	// observation at step t is frames t-k+1..t, the first frame repeated
	// before the episode's start. Each frame is stored once.
	FrameStack int `msgpack:"frame_stack" json:"frame_stack"`
	// FrameShape, if set, is the shape of one frame (FrameSize values).
	// An image, [H, W, C] channels last, is stacked along its channels:
	// an observation is [H, W, FrameStack*C], the oldest frame's channels
	// first at every pixel, which is what a convolution over stacked
	// frames expects. Otherwise an observation is the frames one after
	// the other, [FrameStack*FrameSize].
	FrameShape []int `msgpack:"frame_shape" json:"frame_shape"`
	// RewardWeights has one weight per reward dimension; the scalar reward
	// is their dot product with the reward vector. Default [1].
	RewardWeights []float32 `msgpack:"reward_weights" json:"reward_weights"`
	Gamma         float64   `msgpack:"gamma" json:"gamma"`
	// NStep is n of the n-step returns (default 1).
	NStep int `msgpack:"n_step" json:"n_step"`
	// Lambda of the TD(lambda) returns: 1 Monte-Carlo, 0 one-step.
	Lambda float64 `msgpack:"lambda" json:"lambda"`
	// MaxTransitions bounds the transitions held, open episodes included;
	// MaxEpisodes the closed episodes held. The oldest closed episodes go
	// first (counted in Stats).
	MaxTransitions int `msgpack:"max_transitions" json:"max_transitions"`
	MaxEpisodes    int `msgpack:"max_episodes" json:"max_episodes"`
	// Alpha is the exponent of local prioritized sampling; PriorityEps is
	// added to |error| so that no transition has priority zero.
	Alpha       float64 `msgpack:"alpha" json:"alpha"`
	PriorityEps float64 `msgpack:"priority_eps" json:"priority_eps"`
	Seed        uint64  `msgpack:"seed" json:"seed"`
}

func (c Config) withDefaults() Config {
	c.FrameStack = cmp.Or(c.FrameStack, 1)
	c.NStep = cmp.Or(c.NStep, 1)
	if len(c.RewardWeights) == 0 {
		c.RewardWeights = []float32{1}
	}
	c.PriorityEps = cmp.Or(c.PriorityEps, 1e-6)
	return c
}

// ErrBadConfig, ErrBadStep, ErrUnknownEpisode and ErrMemoryFull are for
// errors.Is.
var (
	ErrBadConfig      = errors.New("localreplay: bad config")
	ErrBadStep        = errors.New("localreplay: bad step")
	ErrUnknownEpisode = errors.New("localreplay: unknown episode")
	// ErrMemoryFull: open episodes alone fill MaxTransitions (an episode
	// longer than the memory); nothing closed is left to drop.
	ErrMemoryFull = errors.New("localreplay: memory full of open episodes")
)

func (c Config) validate() error {
	switch {
	case c.FrameSize <= 0:
		return fmt.Errorf("%w: frame_size %d: want > 0", ErrBadConfig, c.FrameSize)
	case c.FrameStack < 1:
		return fmt.Errorf("%w: frame_stack %d: want >= 1", ErrBadConfig, c.FrameStack)
	case c.FrameShape != nil && !shapeOf(c.FrameShape, c.FrameSize):
		return fmt.Errorf("%w: frame_shape %v: want positive dimensions of frame_size %d values", ErrBadConfig, c.FrameShape, c.FrameSize)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("%w: gamma %v: want 0..1", ErrBadConfig, c.Gamma)
	case c.NStep < 1:
		return fmt.Errorf("%w: n_step %d: want >= 1", ErrBadConfig, c.NStep)
	case !(c.Lambda >= 0 && c.Lambda <= 1):
		return fmt.Errorf("%w: lambda %v: want 0..1", ErrBadConfig, c.Lambda)
	case c.MaxTransitions < 1 || c.MaxTransitions > math.MaxInt32:
		return fmt.Errorf("%w: max_transitions %d: want 1..%d", ErrBadConfig, c.MaxTransitions, math.MaxInt32)
	case c.MaxEpisodes < 1:
		return fmt.Errorf("%w: max_episodes %d: want >= 1", ErrBadConfig, c.MaxEpisodes)
	case !(c.Alpha >= 0) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("%w: alpha %v: want finite >= 0", ErrBadConfig, c.Alpha)
	case !(c.PriorityEps > 0) || math.IsInf(c.PriorityEps, 0):
		return fmt.Errorf("%w: priority_eps %v: want finite > 0", ErrBadConfig, c.PriorityEps)
	}
	return nil
}

// shapeOf reports whether shape has positive dimensions whose product is n.
func shapeOf(shape []int, n int) bool {
	p := 1
	for _, d := range shape {
		if d < 1 || d > n || p > n/d {
			return false
		}
		p *= d
	}
	return len(shape) > 0 && p == n
}

// Step is what an actor records for one environment step from state s_t.
type Step struct {
	Action int32
	// Reward is the reward vector (len(RewardWeights) values).
	Reward []float32
	// Value is the actor's V(s_t) (max_a Q(s_t, a) for DQN): the bootstrap
	// of the returns that end at s_t.
	Value float32
	// Estimate is what the initial priority measures the error of: Q(s_t,
	// a_t) for DQN (Ape-X), V(s_t) for an actor-critic.
	Estimate float32
	// Frame is the frame after the step (s_{t+1}'s newest frame).
	Frame []float32
}

// Transition is one stored step with its returns, as sent to the replay.
type Transition struct {
	// Obs is s_t (FrameStack frames), NextObs s_{t+m}, m = min(n, T-t);
	// binary ones travel packed (api.Frames).
	Obs     api.Frames `msgpack:"obs"`
	Action  int32      `msgpack:"action"`
	NextObs api.Frames `msgpack:"next_obs"`
	// Reward is sum_{k<m} gamma^k r_{t+k} (scalar), RewardVec the same per
	// reward dimension.
	Reward    float32             `msgpack:"reward"`
	RewardVec api.Tensor[float32] `msgpack:"reward_vec"`
	// Discount multiplies the bootstrap at NextObs: gamma^m, 0 when the
	// episode terminated at t+m.
	Discount float32 `msgpack:"discount"`
	// NStepReturn is Reward + Discount * V(s_{t+m}); LambdaReturn the
	// TD(lambda) return of s_t.
	NStepReturn  float32 `msgpack:"n_step_return"`
	LambdaReturn float32 `msgpack:"lambda_return"`
	// Priority is |NStepReturn - Estimate| + PriorityEps: the initial
	// priority (Ape-X).
	Priority float32 `msgpack:"priority"`
}

// Stats are a Memory's counts.
type Stats struct {
	Transitions     int   `json:"transitions"` // in closed episodes
	OpenTransitions int   `json:"open_transitions"`
	Episodes        int   `json:"episodes"` // closed, held
	OpenEpisodes    int   `json:"open_episodes"`
	Frames          int   `json:"frames"` // stored, open episodes included
	Closed          int64 `json:"closed"`
	// DroppedEpisodes and DroppedTransitions: evicted to stay in bounds.
	DroppedEpisodes    int64 `json:"dropped_episodes"`
	DroppedTransitions int64 `json:"dropped_transitions"`
}

// EpisodeID names an open episode.
type EpisodeID int64

type episode struct {
	id       EpisodeID
	frames   [][]float32 // frames[0] initial; frames[t+1] after step t
	actions  []int32
	rvec     [][]float32
	r        []float64 // weighted scalar reward
	values   []float32
	estimate []float32
	// set at close: returns and priorities (observations are built from
	// frames when a transition leaves the memory), next frame indices
	trans []Transition
	next  []int
	first int // ring slot of transition 0
	key   uint64
}

// Memory is an actor's local replay memory: episodes are opened, stepped
// and closed; at close every step's returns are computed and the episode
// becomes sampleable. It is not safe for concurrent use (one actor loop).
type Memory struct {
	cfg     Config
	rng     *rand.Rand
	open    map[EpisodeID]*episode
	closed  []*episode // oldest first
	nextID  EpisodeID
	nextKey uint64
	// tree holds p^alpha of closed transitions in a ring of slots; owner
	// maps a slot to its episode and step.
	tree      *replay.SumTree
	owner     []slotRef
	ringHead  int // slot of the oldest closed transition
	ringUsed  int
	openSteps int
	newest    []*episode // closed since the last TakeNew
	st        Stats
	// obsShape is a stacked observation's shape; channels the values of
	// one frame that stay together when frames are stacked (the last
	// dimension of an image, else the whole frame).
	obsShape []int
	channels int
}

type slotRef struct {
	ep *episode
	t  int
}

// New returns an empty memory.
func New(cfg Config) (*Memory, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Memory{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x5851f42d4c957f2d)),
		open:     map[EpisodeID]*episode{},
		tree:     replay.NewSumTree(cfg.MaxTransitions),
		owner:    make([]slotRef, cfg.MaxTransitions),
		obsShape: []int{cfg.FrameStack * cfg.FrameSize},
		channels: cfg.FrameSize,
	}
	if len(cfg.FrameShape) > 1 {
		m.obsShape = slices.Clone(cfg.FrameShape)
		m.channels = m.obsShape[len(m.obsShape)-1]
		m.obsShape[len(m.obsShape)-1] *= cfg.FrameStack
	}
	return m, nil
}

// Stats returns the memory's counts.
func (m *Memory) Stats() Stats {
	s := m.st
	s.Transitions, s.OpenTransitions, s.Episodes, s.OpenEpisodes = m.ringUsed, m.openSteps, len(m.closed), len(m.open)
	for _, e := range m.closed {
		s.Frames += len(e.frames)
	}
	for _, e := range m.open {
		s.Frames += len(e.frames)
	}
	return s
}

func (m *Memory) checkFrame(f []float32) error {
	if len(f) != m.cfg.FrameSize {
		return fmt.Errorf("%w: frame of %d floats, frame_size %d", ErrBadStep, len(f), m.cfg.FrameSize)
	}
	return nil
}

// Open starts an episode at its first frame (copied).
func (m *Memory) Open(frame []float32) (EpisodeID, error) {
	if err := m.checkFrame(frame); err != nil {
		return 0, err
	}
	m.nextID++
	m.open[m.nextID] = &episode{id: m.nextID, frames: [][]float32{append([]float32(nil), frame...)}}
	return m.nextID, nil
}

// Step records one step of an open episode (inputs copied). It drops the
// oldest closed episodes to stay within MaxTransitions.
func (m *Memory) Step(id EpisodeID, s Step) error {
	e, ok := m.open[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownEpisode, id)
	}
	if err := m.checkFrame(s.Frame); err != nil {
		return err
	}
	if len(s.Reward) != len(m.cfg.RewardWeights) {
		return fmt.Errorf("%w: reward of %d values, %d reward weights", ErrBadStep, len(s.Reward), len(m.cfg.RewardWeights))
	}
	for m.ringUsed+m.openSteps+1 > m.cfg.MaxTransitions {
		if len(m.closed) == 0 {
			return fmt.Errorf("%w: %d open transitions, max_transitions %d", ErrMemoryFull, m.openSteps, m.cfg.MaxTransitions)
		}
		m.dropOldest()
	}
	r := 0.0
	for d, w := range m.cfg.RewardWeights {
		r += float64(w) * float64(s.Reward[d])
	}
	e.frames = append(e.frames, append([]float32(nil), s.Frame...))
	e.actions = append(e.actions, s.Action)
	e.rvec = append(e.rvec, append([]float32(nil), s.Reward...))
	e.r = append(e.r, r)
	e.values = append(e.values, s.Value)
	e.estimate = append(e.estimate, s.Estimate)
	m.openSteps++
	return nil
}

// Close ends an episode: terminated (a terminal state: nothing follows)
// or truncated with bootstrap = V(s_T). Its returns are computed and its
// transitions become sampleable. An episode without steps is discarded.
func (m *Memory) Close(id EpisodeID, terminated bool, bootstrap float32) error {
	e, ok := m.open[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownEpisode, id)
	}
	delete(m.open, id)
	T := len(e.actions)
	m.openSteps -= T
	if T == 0 {
		return nil
	}
	for len(m.closed) >= m.cfg.MaxEpisodes {
		m.dropOldest()
	}
	e.trans, e.next = m.returns(e, terminated, float64(bootstrap))
	e.first = (m.ringHead + m.ringUsed) % m.cfg.MaxTransitions
	e.key = m.nextKey
	m.nextKey += uint64(T)
	for t := range T {
		s := (e.first + t) % m.cfg.MaxTransitions
		m.owner[s] = slotRef{e, t}
		m.tree.Set(s, math.Pow(float64(e.trans[t].Priority), m.cfg.Alpha))
	}
	m.ringUsed += T
	m.closed = append(m.closed, e)
	m.newest = append(m.newest, e)
	if len(m.newest) > m.cfg.MaxEpisodes { // nobody takes them: keep it bounded
		m.newest = m.newest[1:]
	}
	m.st.Closed++
	return nil
}

func (m *Memory) dropOldest() {
	e := m.closed[0]
	m.closed = m.closed[1:]
	T := len(e.trans)
	for t := range T {
		s := (e.first + t) % m.cfg.MaxTransitions
		m.tree.Set(s, 0)
		m.owner[s] = slotRef{}
	}
	m.ringHead = (m.ringHead + T) % m.cfg.MaxTransitions
	m.ringUsed -= T
	m.st.DroppedEpisodes++
	m.st.DroppedTransitions += int64(T)
	e.trans, e.frames = nil, nil
}

// obs returns the stacked observation at frame index i: at every group of
// m.channels values (a pixel of an image; the whole frame otherwise) the
// k frames' values, oldest first.
func (m *Memory) obs(e *episode, i int) api.Tensor[float32] {
	k, f, c := m.cfg.FrameStack, m.cfg.FrameSize, m.channels
	out := make([]float32, k*f)
	for s := range k {
		frame := e.frames[max(i-k+1+s, 0)]
		for p := range f / c {
			copy(out[(p*k+s)*c:(p*k+s+1)*c], frame[p*c:(p+1)*c])
		}
	}
	return api.Tensor[float32]{Shape: slices.Clone(m.obsShape), Data: out}
}

// returns computes every step's n-step and TD(lambda) returns:
//
//	m = min(n, T-t)
//	R_t = sum_{k<m} gamma^k r_{t+k}
//	boot(j) = V(s_j) for j < T; at T: 0 if terminated, else the bootstrap
//	G^n_t = R_t + gamma^m boot(t+m)
//	G^λ_t = r_t + gamma ((1-λ) boot(t+1) + λ G^λ_{t+1}),  G^λ_T = boot(T)
func (m *Memory) returns(e *episode, terminated bool, bootstrap float64) ([]Transition, []int) {
	T, n, g, lam := len(e.actions), m.cfg.NStep, m.cfg.Gamma, m.cfg.Lambda
	dims := len(m.cfg.RewardWeights)
	boot := func(j int) float64 {
		if j < T {
			return float64(e.values[j])
		}
		if terminated {
			return 0
		}
		return bootstrap
	}
	out, next := make([]Transition, T), make([]int, T)
	lret := boot(T)
	for t := T - 1; t >= 0; t-- {
		lret = e.r[t] + g*((1-lam)*boot(t+1)+lam*lret)
		steps := min(n, T-t)
		R, disc := 0.0, 1.0
		rv := make([]float32, dims)
		for k := range steps {
			R += disc * e.r[t+k]
			for d := range dims {
				rv[d] += float32(disc) * e.rvec[t+k][d]
			}
			disc *= g
		}
		if t+steps == T && terminated {
			disc = 0
		}
		nret := R + disc*boot(t+steps)
		next[t] = t + steps
		out[t] = Transition{
			Action: e.actions[t], Reward: float32(R), RewardVec: api.Tensor[float32]{Shape: []int{dims}, Data: rv},
			Discount: float32(disc), NStepReturn: float32(nret), LambdaReturn: float32(lret),
			Priority: float32(math.Abs(nret-float64(e.estimate[t])) + m.cfg.PriorityEps),
		}
	}
	return out, next
}

// transition returns step t of a closed episode with its observations.
func (m *Memory) transition(e *episode, t int) Transition {
	tr := e.trans[t]
	tr.Obs, tr.NextObs = api.NewFrames(m.obs(e, t)), api.NewFrames(m.obs(e, e.next[t]))
	return tr
}
