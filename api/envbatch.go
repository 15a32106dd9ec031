package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// EnvBatch is a set of environments of one kind that are reset and stepped
// together: for environments out of process (package pyenv), where every
// call is a round trip, a whole batch of calls travels in one message.
// Every environment of a batch has the same spaces and agents.
//
// An EnvBatch is not safe for concurrent use.
type EnvBatch interface {
	// Len returns the number of environments, indexed 0 to Len()-1.
	Len() int
	// Run resets the environments named by resets and then steps those
	// named by steps (an environment appears at most once in all), filling
	// in each EnvReset's Obs and each EnvStep's Result. On error the
	// filled fields are unspecified.
	Run(ctx context.Context, resets []EnvReset, steps []EnvStep) error
	// ObservationSpace, ActionSpace and Agents are those of every
	// environment of the batch (see [Env]).
	ObservationSpace() Space
	ActionSpace() Space
	Agents() []string
	// Close releases every environment.
	Close() error
}

// EnvReset asks [EnvBatch.Run] to reset environment Env with Seed; Run
// sets Obs, one observation per agent, and, for an environment whose
// agents take turns ([Turns]), Acting.
type EnvReset struct {
	Env    int
	Seed   int64
	Obs    [][]float32
	Acting []bool
}

// EnvStep asks [EnvBatch.Run] to step environment Env with Actions, one
// per agent; Run sets Result.
type EnvStep struct {
	Env     int
	Actions []Action
	Result  Step
}

// EnvBatchFactory creates a batch of n environments from one configuration;
// ctx bounds the start, and log receives what the environments say (a
// Python environment's output and tracebacks).
type EnvBatchFactory func(ctx context.Context, cfg map[string]any, n int, log *slog.Logger) (EnvBatch, error)

// RegisterEnvBatch makes name's environments available to [NewEnvBatch] as
// batches built by f, which is used instead of n calls of the EnvFactory
// registered under the same name. Registering a name twice is an error
// wrapping [ErrDuplicateEnv].
func RegisterEnvBatch(name string, f EnvBatchFactory) error {
	if name == "" {
		return errors.New("api: RegisterEnvBatch: empty name")
	}
	if f == nil {
		return fmt.Errorf("api: RegisterEnvBatch %q: nil factory", name)
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, ok := registry.batches[name]; ok {
		return fmt.Errorf("api: RegisterEnvBatch %q: %w", name, ErrDuplicateEnv)
	}
	if registry.batches == nil {
		registry.batches = make(map[string]EnvBatchFactory)
	}
	registry.batches[name] = f
	return nil
}

// NewEnvBatch creates n environments registered under name as one batch:
// with the name's EnvBatchFactory if it has one, else as n environments of
// its EnvFactory stepped one after the other ([SerialBatch]). Either way
// their observations are stacked when cfg asks ([FrameStackKey]).
func NewEnvBatch(ctx context.Context, name string, cfg map[string]any, n int, log *slog.Logger) (EnvBatch, error) {
	if n < 1 {
		return nil, fmt.Errorf("api: NewEnvBatch %q: %d environments, want >= 1", name, n)
	}
	registry.mu.RLock()
	f, ok := registry.batches[name]
	registry.mu.RUnlock()
	if ok {
		if log == nil {
			log = slog.Default()
		}
		stack, rest, err := splitFrameStack(cfg)
		if err != nil {
			return nil, fmt.Errorf("api: creating environment batch %q: %w", name, err)
		}
		b, err := f(ctx, rest, n, log)
		if err != nil {
			return nil, fmt.Errorf("api: creating environment batch %q: %w", name, err)
		}
		stacked, err := newFrameStackBatch(b, stack)
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("api: creating environment batch %q: %w", name, err)
		}
		return stacked, nil
	}
	envs := make([]Env, 0, n)
	for range n {
		e, err := NewEnv(name, cfg)
		if err != nil {
			for _, e := range envs {
				_ = e.Close()
			}
			return nil, err
		}
		envs = append(envs, e)
	}
	return SerialBatch(envs...), nil
}

// SerialBatch returns a batch over envs (at least one, with equal spaces
// and agents) that runs its calls one after the other. Close closes envs.
func SerialBatch(envs ...Env) EnvBatch { return serialBatch(envs) }

type serialBatch []Env

func (b serialBatch) Len() int                { return len(b) }
func (b serialBatch) ObservationSpace() Space { return b[0].ObservationSpace() }
func (b serialBatch) ActionSpace() Space      { return b[0].ActionSpace() }
func (b serialBatch) Agents() []string        { return b[0].Agents() }

func (b serialBatch) Run(ctx context.Context, resets []EnvReset, steps []EnvStep) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range resets {
		r := &resets[i]
		if r.Env < 0 || r.Env >= len(b) {
			return fmt.Errorf("api: reset of environment %d of %d", r.Env, len(b))
		}
		obs, err := b[r.Env].Reset(r.Seed)
		if err != nil {
			return fmt.Errorf("api: environment %d: reset: %w", r.Env, err)
		}
		r.Obs, r.Acting = obs, acting(b[r.Env])
	}
	for i := range steps {
		s := &steps[i]
		if s.Env < 0 || s.Env >= len(b) {
			return fmt.Errorf("api: step of environment %d of %d", s.Env, len(b))
		}
		res, err := b[s.Env].Step(s.Actions)
		if err != nil {
			return fmt.Errorf("api: environment %d: step: %w", s.Env, err)
		}
		if a := acting(b[s.Env]); a != nil {
			res.Acting = a
		}
		s.Result = res
	}
	return nil
}

// acting is a copy of e's Acting if its agents take turns, else nil.
func acting(e Env) []bool {
	if t, ok := e.(Turns); ok {
		return slices.Clone(t.Acting())
	}
	return nil
}

func (b serialBatch) Close() error {
	var errs []error
	for _, e := range b {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}
