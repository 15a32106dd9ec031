package api

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// FrameStackKey is the environment configuration key that every
// environment made by [NewEnv] or [NewEnvBatch] takes: with frame_stack N
// (N > 1) an agent's observation is its last N frames, stacked along the
// last axis, oldest first. An image [H, W, C] becomes [H, W, N·C], each
// pixel's channels frame after frame, which is what a convolution over
// stacked frames wants; a vector [D] becomes [N·D]. At the start of an
// episode the first frame stands in for the frames before it.
//
// The key is taken out of the configuration before the environment's own
// factory sees it, so it works for every environment, Go or Python, and
// every worker that builds the environment from the same env_config (the
// actor, the policy worker and the trainer) agrees on the stacked shape.
const FrameStackKey = "frame_stack"

// MaxFrameStack bounds frame_stack.
const MaxFrameStack = 64

// splitFrameStack returns frame_stack (1 when absent) and the
// configuration without it; cfg itself is not changed.
func splitFrameStack(cfg map[string]any) (int, map[string]any, error) {
	if _, ok := cfg[FrameStackKey]; !ok {
		return 1, cfg, nil
	}
	n, err := Config(cfg).Int(FrameStackKey, 1)
	if err != nil {
		return 0, nil, err
	}
	if n < 1 || n > MaxFrameStack {
		return 0, nil, fmt.Errorf("%s %d: want 1 to %d", FrameStackKey, n, MaxFrameStack)
	}
	rest := maps.Clone(cfg)
	delete(rest, FrameStackKey)
	return n, rest, nil
}

// StackedSpace is the observation space of n frames of s stacked as
// [FrameStackKey] describes. s must be a Box.
func StackedSpace(s Space, n int) (Space, error) {
	if err := s.Validate(); err != nil {
		return Space{}, err
	}
	if s.Kind != Box {
		return Space{}, fmt.Errorf("%s needs a Box observation space, got %v", FrameStackKey, s.Kind)
	}
	st := newStacker(s, n)
	out := Space{Kind: Box, Shape: slices.Clone(s.Shape), Low: make([]float32, n*len(s.Low)), High: make([]float32, n*len(s.High))}
	out.Shape[len(out.Shape)-1] *= n
	st.fill(s.Low)
	st.stack(out.Low)
	st.fill(s.High)
	st.stack(out.High)
	return out, nil
}

// stacker holds one agent's last n frames.
type stacker struct {
	n, size, group int         // frames, values per frame, values of one frame kept together (the last axis)
	frames         [][]float32 // a ring; frames[head] is the oldest
	head           int
}

func newStacker(s Space, n int) *stacker {
	st := &stacker{n: n, size: s.Size(), group: s.Shape[len(s.Shape)-1], frames: make([][]float32, n)}
	for i := range st.frames {
		st.frames[i] = make([]float32, st.size)
	}
	return st
}

// fill makes every frame obs: the start of an episode.
func (st *stacker) fill(obs []float32) {
	for _, f := range st.frames {
		copy(f, obs)
	}
	st.head = 0
}

// push replaces the oldest frame with obs.
func (st *stacker) push(obs []float32) {
	copy(st.frames[st.head], obs)
	st.head = (st.head + 1) % st.n
}

// stack writes the frames into dst (n·size values), oldest first within
// each group.
func (st *stacker) stack(dst []float32) {
	g := st.group
	for p := 0; p < st.size; p += g {
		out := dst[p*st.n:]
		for k := range st.n {
			copy(out[k*g:(k+1)*g], st.frames[(st.head+k)%st.n][p:p+g])
		}
	}
}

// frameStack keeps a stacker per agent of one environment.
type frameStack struct {
	agents []*stacker
	out    [][]float32 // the stacked observations handed out by the last step
}

func newFrameStack(obs Space, n, agents int) *frameStack {
	fs := &frameStack{agents: make([]*stacker, agents), out: make([][]float32, agents)}
	for i := range fs.agents {
		fs.agents[i] = newStacker(obs, n)
		fs.out[i] = make([]float32, n*obs.Size())
	}
	return fs
}

// reset starts an episode at obs and returns new stacked observations.
func (fs *frameStack) reset(obs [][]float32) ([][]float32, error) {
	if err := fs.check(obs); err != nil {
		return nil, err
	}
	out := make([][]float32, len(obs))
	for i, st := range fs.agents {
		st.fill(obs[i])
		out[i] = make([]float32, st.n*st.size)
		st.stack(out[i])
	}
	return out, nil
}

// step adds obs and returns the stacked observations. They are reused by
// the next step, as an Env's own Step results may be, so that stepping
// allocates nothing.
func (fs *frameStack) step(obs [][]float32) ([][]float32, error) {
	if err := fs.check(obs); err != nil {
		return nil, err
	}
	for i, st := range fs.agents {
		st.push(obs[i])
		st.stack(fs.out[i])
	}
	return fs.out, nil
}

func (fs *frameStack) check(obs [][]float32) error {
	if len(obs) != len(fs.agents) {
		return fmt.Errorf("%s: %d observations for %d agents", FrameStackKey, len(obs), len(fs.agents))
	}
	for i, o := range obs {
		if len(o) != fs.agents[i].size {
			return fmt.Errorf("%s: agent %d: observation of %d values, the space has %d", FrameStackKey, i, len(o), fs.agents[i].size)
		}
	}
	return nil
}

// NewFrameStack wraps e so that its observations are its last n frames,
// as [FrameStackKey] describes. n = 1 returns e.
func NewFrameStack(e Env, n int) (Env, error) {
	if n == 1 {
		return e, nil
	}
	space, err := StackedSpace(e.ObservationSpace(), n)
	if err != nil {
		return nil, err
	}
	return &frameStackEnv{Env: e, space: space, fs: newFrameStack(e.ObservationSpace(), n, len(e.Agents()))}, nil
}

type frameStackEnv struct {
	Env
	space Space
	fs    *frameStack
}

func (e *frameStackEnv) ObservationSpace() Space { return e.space }

func (e *frameStackEnv) Reset(seed int64) ([][]float32, error) {
	obs, err := e.Env.Reset(seed)
	if err != nil {
		return nil, err
	}
	return e.fs.reset(obs)
}

func (e *frameStackEnv) Step(actions []Action) (Step, error) {
	s, err := e.Env.Step(actions)
	if err != nil {
		return s, err
	}
	if s.Obs, err = e.fs.step(s.Obs); err != nil {
		return Step{}, err
	}
	return s, nil
}

// newFrameStackBatch wraps b so that its environments' observations are
// their last n frames. n = 1 returns b.
func newFrameStackBatch(b EnvBatch, n int) (EnvBatch, error) {
	if n == 1 {
		return b, nil
	}
	space, err := StackedSpace(b.ObservationSpace(), n)
	if err != nil {
		return nil, err
	}
	fb := &frameStackBatch{EnvBatch: b, space: space, envs: make([]*frameStack, b.Len())}
	for i := range fb.envs {
		fb.envs[i] = newFrameStack(b.ObservationSpace(), n, len(b.Agents()))
	}
	return fb, nil
}

type frameStackBatch struct {
	EnvBatch
	space Space
	envs  []*frameStack
}

func (b *frameStackBatch) ObservationSpace() Space { return b.space }

func (b *frameStackBatch) Run(ctx context.Context, resets []EnvReset, steps []EnvStep) error {
	if err := b.EnvBatch.Run(ctx, resets, steps); err != nil {
		return err
	}
	for i := range resets {
		r := &resets[i]
		if r.Env < 0 || r.Env >= len(b.envs) {
			return fmt.Errorf("%s: reset of environment %d of %d", FrameStackKey, r.Env, len(b.envs))
		}
		obs, err := b.envs[r.Env].reset(r.Obs)
		if err != nil {
			return fmt.Errorf("environment %d: %w", r.Env, err)
		}
		r.Obs = obs
	}
	for i := range steps {
		s := &steps[i]
		if s.Env < 0 || s.Env >= len(b.envs) {
			return fmt.Errorf("%s: step of environment %d of %d", FrameStackKey, s.Env, len(b.envs))
		}
		obs, err := b.envs[s.Env].step(s.Result.Obs)
		if err != nil {
			return fmt.Errorf("environment %d: %w", s.Env, err)
		}
		s.Result.Obs = obs
	}
	return nil
}
