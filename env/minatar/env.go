package minatar

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/distrl/distrl/api"
)

// pcgStream is the fixed second word of the PCG seed; the episode seed is
// the first.
const pcgStream = 0x5851f42d4c957f2d

// DefaultSticky is the paper's probability of repeating the previous
// action.
const DefaultSticky = 0.1

// Options configure an Env; [DefaultOptions] gives the paper's protocol.
type Options struct {
	// Sticky is the probability, in [0, 1], that a step repeats the
	// action executed on the previous step instead of the chosen one.
	Sticky float64
	// MinimalActions restricts the action space to the game's minimal
	// action set; otherwise all six actions are valid.
	MinimalActions bool
	// Ramping makes the games that have a difficulty ramp (Asterix,
	// Seaquest, Space Invaders) harder as the episode goes on; Breakout
	// and Freeway have none and ignore it.
	Ramping bool
	// MaxEpisodeSteps, when positive, truncates episodes after that many
	// steps. MinAtar has no such limit (Freeway's 2501 steps are part of
	// its rules); 0 keeps it so.
	MaxEpisodeSteps int
}

// DefaultOptions are the paper's settings: sticky actions with
// probability 0.1, the full action set, difficulty ramping, no time limit.
func DefaultOptions() Options { return Options{Sticky: DefaultSticky, Ramping: true} }

// specs lists the games by name, in alphabetical order.
var specs = []*spec{&asterixSpec, &breakoutSpec, &freewaySpec, &seaquestSpec, &invadersSpec}

// Games returns the names of the games: asterix, breakout, freeway,
// seaquest, space_invaders.
func Games() []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	return names
}

// EnvName is the registry name of a game: "minatar-" and its name.
func EnvName(game string) string { return "minatar-" + game }

func lookup(name string) (*spec, error) {
	for _, s := range specs {
		if s.name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("minatar: unknown game %q (known: %v)", name, Games())
}

// Channels returns a game's observation channels, in order.
func Channels(game string) ([]string, error) {
	s, err := lookup(game)
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.channels), nil
}

// Env is one MinAtar game behind [api.Env]: a single agent, a Discrete
// action space and a [10, 10, C] binary observation.
type Env struct {
	spec    *spec
	game    game
	opts    Options
	actions []int32 // this Env's action index -> full action set
	pcg     *rand.PCG
	rng     *rand.Rand
	last    int32 // the action index executed on the previous step
	steps   int
	live    bool

	// What Step returns lives here, so that a step allocates nothing.
	obs        []float32
	obsRows    [1][]float32
	reward     [1]float32
	terminated [1]bool
	truncated  [1]bool
}

var _ api.Env = (*Env)(nil)

// New returns the named game (see [Games]) with the options. Call Reset
// before Step.
func New(name string, opts Options) (*Env, error) {
	s, err := lookup(name)
	if err != nil {
		return nil, err
	}
	// The negated form also refuses NaN.
	if !(opts.Sticky >= 0 && opts.Sticky <= 1) {
		return nil, fmt.Errorf("minatar: %s: sticky action probability %v, want one in [0, 1]", name, opts.Sticky)
	}
	if opts.MaxEpisodeSteps < 0 {
		return nil, fmt.Errorf("minatar: %s: max episode steps %d, want >= 0 (0: no limit)", name, opts.MaxEpisodeSteps)
	}
	e := &Env{
		spec:    s,
		game:    s.newGame(opts.Ramping),
		opts:    opts,
		actions: []int32{Noop, Left, Up, Right, Down, Fire},
		pcg:     rand.NewPCG(0, pcgStream),
		obs:     make([]float32, Size*Size*len(s.channels)),
	}
	if opts.MinimalActions {
		e.actions = slices.Clone(s.minimal)
	}
	e.rng = rand.New(e.pcg)
	e.obsRows[0] = e.obs
	return e, nil
}

// Factory returns the registry factory of a game. It accepts the keys
// "sticky" (probability, default 0.1), "minimal_actions" (default false),
// "ramping" (default true) and "max_episode_steps" (default 0, no limit),
// and refuses any other.
func Factory(name string) api.EnvFactory {
	return func(cfg map[string]any) (api.Env, error) {
		c := api.Config(cfg)
		if err := c.CheckKeys("sticky", "minimal_actions", "ramping", "max_episode_steps"); err != nil {
			return nil, err
		}
		o := DefaultOptions()
		var err error
		if o.Sticky, err = c.Float("sticky", o.Sticky); err != nil {
			return nil, err
		}
		if o.MinimalActions, err = c.Bool("minimal_actions", o.MinimalActions); err != nil {
			return nil, err
		}
		if o.Ramping, err = c.Bool("ramping", o.Ramping); err != nil {
			return nil, err
		}
		if o.MaxEpisodeSteps, err = c.Int("max_episode_steps", o.MaxEpisodeSteps); err != nil {
			return nil, err
		}
		return New(name, o)
	}
}

// Game returns the game's name.
func (e *Env) Game() string { return e.spec.name }

// Reset starts a new episode with the seed. The previous action, which a
// sticky first step repeats, carries over from the last step of the
// previous episode, as in MinAtar's Environment (its last_action survives
// reset); a new Env's is the no-op. The observation returned is a new
// slice.
func (e *Env) Reset(seed int64) ([][]float32, error) {
	e.pcg.Seed(uint64(seed), pcgStream)
	e.game.reset(e.rng)
	e.steps = 0
	e.live = true
	e.observe()
	return [][]float32{slices.Clone(e.obs)}, nil
}

// Step applies one Discrete action. With probability Sticky the action
// executed is the previous step's instead. The Step returned, its
// observation included, is the Env's own memory: it is valid until the
// next Step or Reset, and a caller that keeps it must copy it.
func (e *Env) Step(actions []api.Action) (api.Step, error) {
	if !e.live {
		return api.Step{}, fmt.Errorf("minatar: %s: Step: %w", e.spec.name, api.ErrNeedsReset)
	}
	if len(actions) != 1 {
		return api.Step{}, fmt.Errorf("minatar: %s: Step: got %d actions, want 1: %w", e.spec.name, len(actions), api.ErrInvalidAction)
	}
	a := actions[0].Discrete
	if a < 0 || int(a) >= len(e.actions) {
		return api.Step{}, fmt.Errorf("minatar: %s: Step: action %d outside [0, %d): %w", e.spec.name, a, len(e.actions), api.ErrInvalidAction)
	}
	// Draw only when sticky actions are on, so that Sticky 0 leaves the
	// game's random stream as it would be without them.
	if e.opts.Sticky > 0 && e.rng.Float64() < e.opts.Sticky {
		a = e.last
	}
	e.last = a
	r, terminal := e.game.step(e.actions[a], e.rng)
	e.steps++
	truncated := e.opts.MaxEpisodeSteps > 0 && e.steps >= e.opts.MaxEpisodeSteps
	e.live = !terminal && !truncated
	e.observe()
	e.reward[0] = float32(r)
	e.terminated[0] = terminal
	e.truncated[0] = truncated
	return api.Step{Obs: e.obsRows[:], Rewards: e.reward[:], Terminated: e.terminated[:], Truncated: e.truncated[:]}, nil
}

// observe redraws the observation buffer from the game's state.
func (e *Env) observe() {
	clear(e.obs)
	e.game.draw(grid{cells: e.obs, c: len(e.spec.channels)})
}

// ObservationSpace is a Box of shape [10, 10, C] with values in {0, 1}.
func (e *Env) ObservationSpace() api.Space { return api.NewBox(0, 1, Size, Size, len(e.spec.channels)) }

// ActionSpace is Discrete(6), or Discrete(n) for a minimal set of n.
func (e *Env) ActionSpace() api.Space { return api.NewDiscrete(len(e.actions)) }

// ActionNames returns MinAtar's letter for each action of this Env's
// action space: n, l, u, r, d, f.
func (e *Env) ActionNames() []string {
	names := make([]string, len(e.actions))
	for i, a := range e.actions {
		names[i] = actionNames[a : a+1]
	}
	return names
}

// Agents returns the single agent's id, "agent_0".
func (e *Env) Agents() []string { return []string{"agent_0"} }

// Close does nothing; a game holds no resources.
func (e *Env) Close() error { return nil }
