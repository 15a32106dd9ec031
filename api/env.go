package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Env is an environment that one or more agents act in, in lock step.
// Single-agent environments have exactly one agent; every per-agent slice
// is indexed like [Env.Agents].
//
// An Env is not safe for concurrent use; an actor owns its environments.
type Env interface {
	// Reset starts a new episode with the seed and returns each agent's
	// observation.
	Reset(seed int64) ([][]float32, error)
	// Step applies one action per agent and returns the transition. Once an
	// episode has ended (any agent terminated or truncated), Step returns an
	// error until Reset is called. The Step may be the environment's own
	// memory, valid until its next Step or Reset: a caller that keeps any
	// of it copies it.
	Step(actions []Action) (Step, error)
	// ObservationSpace is the space of one agent's observation.
	ObservationSpace() Space
	// ActionSpace is the space of one agent's action.
	ActionSpace() Space
	// Agents returns the agent ids: at least one, in a fixed order.
	Agents() []string
	// Close releases the environment's resources.
	Close() error
}

// Action is one agent's action: Discrete for a Discrete action space,
// Continuous for a Box action space.
type Action struct {
	Discrete   int32     `msgpack:"discrete"`
	Continuous []float32 `msgpack:"continuous,omitempty"`
}

// Step is the outcome of [Env.Step], with one entry per agent.
//
// Terminated and Truncated follow Gymnasium: a terminated episode ended by
// the environment's rules, so the value of Obs is zero and the learner must
// not bootstrap from it; a truncated episode was cut short (a time limit),
// so the learner should bootstrap from Obs. Both may be true at once, in
// which case termination wins.
type Step struct {
	// Obs is each agent's observation after the step; for an ended
	// episode, the final observation (not the first of the next episode).
	Obs        [][]float32 `msgpack:"obs"`
	Rewards    []float32   `msgpack:"rewards"`
	Terminated []bool      `msgpack:"terminated"`
	Truncated  []bool      `msgpack:"truncated"`
	// Acting, for an environment whose agents take turns (see [Turns]),
	// says whose actions the next Step applies; nil: everyone's.
	Acting []bool `msgpack:"acting,omitempty"`
}

// Turns is implemented by an environment whose agents take turns, as in a
// board game: after Reset and after every Step, Acting says which agents'
// actions the next Step applies (the others' are ignored). [SerialBatch]
// copies it into [EnvReset.Acting] and [Step.Acting]; an actor then asks
// only the acting agents for actions, records a transition only for a
// step an agent acted in, and credits the rewards of the steps it sat out
// (the opponent's move that won) to its last action.
type Turns interface {
	Acting() []bool
}

// ActionMasker is implemented by an environment whose observations say
// which actions are available (a board game's legal moves): action i is
// available where one agent's observation holds more than 0.5 at index
// ActionMask()[i]. A policy built for the environment leaves the others
// out (nn.Spec.ActionMask).
type ActionMasker interface {
	ActionMask() []int
}

// IsActing reports whether agent i acts given acting (nil: every agent
// does), as in [Step.Acting] and [EnvReset.Acting].
func IsActing(acting []bool, i int) bool { return acting == nil || acting[i] }

// Done reports whether the episode has ended for any agent.
func (s Step) Done() bool {
	return slices.Contains(s.Terminated, true) || slices.Contains(s.Truncated, true)
}

// EnvFactory creates an environment from its configuration, which usually
// comes from a config file or an RPC; [Config] helps read it.
type EnvFactory func(cfg map[string]any) (Env, error)

// Errors for errors.Is.
var (
	// ErrUnknownEnv: NewEnv was given a name nobody registered.
	ErrUnknownEnv = errors.New("unknown environment")
	// ErrDuplicateEnv: RegisterEnv was given a name already registered.
	ErrDuplicateEnv = errors.New("environment already registered")
	// ErrNeedsReset is wrapped by the error of Env.Step when no episode is
	// in progress: before the first Reset, or after the episode ended.
	ErrNeedsReset = errors.New("no episode in progress; call Reset")
)

var registry struct {
	mu        sync.RWMutex
	factories map[string]EnvFactory
	batches   map[string]EnvBatchFactory
}

// RegisterEnv makes an environment available to [NewEnv] under name.
// Registering a name twice is an error wrapping [ErrDuplicateEnv]: silently
// replacing a factory would make the environment a run uses depend on
// package initialisation order.
func RegisterEnv(name string, f EnvFactory) error {
	if name == "" {
		return errors.New("api: RegisterEnv: empty name")
	}
	if f == nil {
		return fmt.Errorf("api: RegisterEnv %q: nil factory", name)
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if _, ok := registry.factories[name]; ok {
		return fmt.Errorf("api: RegisterEnv %q: %w", name, ErrDuplicateEnv)
	}
	if registry.factories == nil {
		registry.factories = make(map[string]EnvFactory)
	}
	registry.factories[name] = f
	return nil
}

// NewEnv creates the environment registered under name, its observations
// stacked when cfg asks ([FrameStackKey]). An unknown name yields an error
// wrapping [ErrUnknownEnv] that lists the known names.
func NewEnv(name string, cfg map[string]any) (Env, error) {
	registry.mu.RLock()
	f, ok := registry.factories[name]
	registry.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("api: %w %q (known: %s)", ErrUnknownEnv, name, strings.Join(EnvNames(), ", "))
	}
	stack, cfg, err := splitFrameStack(cfg)
	if err != nil {
		return nil, fmt.Errorf("api: creating environment %q: %w", name, err)
	}
	e, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("api: creating environment %q: %w", name, err)
	}
	if e == nil {
		return nil, fmt.Errorf("api: creating environment %q: factory returned nil", name)
	}
	stacked, err := NewFrameStack(e, stack)
	if err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("api: creating environment %q: %w", name, err)
	}
	return stacked, nil
}

// EnvNames returns the registered environment names, sorted.
func EnvNames() []string {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	names := make([]string, 0, len(registry.factories))
	for n := range registry.factories {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
