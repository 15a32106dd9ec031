package env

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/distrl/distrl/api"
)

// simple_spread constants, as in MPE (multiagent/core.py and
// scenarios/simple_spread.py; PettingZoo keeps the same values).
const (
	spDamping       = 0.25
	spDT            = 0.1
	spAgentSize     = 0.15
	spSensitivity   = 5.0 // MPE's default action scale ("accel" unset)
	spMass          = 1.0
	spContactForce  = 1e2
	spContactMargin = 1e-3

	// SimpleSpreadAgents and SimpleSpreadMaxCycles are the defaults of the
	// registered simple_spread.
	SimpleSpreadAgents    = 3
	SimpleSpreadMaxCycles = 25

	spMaxAgents = 1024 // bounds a config's agent count; observations grow with it
)

// Discrete actions of SimpleSpread, as in MPE.
const (
	SpreadNoop int32 = iota
	SpreadLeft
	SpreadRight
	SpreadDown
	SpreadUp
)

// SimpleSpread is MPE's cooperative navigation ("simple_spread"): N agents
// must cover N landmarks while avoiding each other. Agents move in the plane
// with MPE's physics: an action applies a unit force scaled by 5 along one
// axis (or none), velocities are damped by 25% per step, time advances
// 0.1 s per step, and overlapping agents (discs of radius 0.15) push each
// other apart with MPE's soft contact force.
//
// All agents receive the same reward: minus the sum, over landmarks, of the
// distance to the nearest agent, minus 1 per pair of agents that collide
// (overlap) after the step. This is MPE's shared reward without its quirks:
// the original counts every agent as colliding with itself and sums the
// reward over agents; PettingZoo instead mixes a global and a per-agent
// part (local_ratio). The maxima differ but the optimal behaviour is the
// same.
//
// An agent's observation is its velocity (2), its position (2), the
// positions of the N landmarks relative to it (2N) and those of the other
// agents relative to it (2(N-1)), in agent order; MPE's communication
// channels are always zero in this task and are omitted. Episodes never
// terminate; they are truncated after 25 steps.
type SimpleSpread struct {
	n, maxCycles int
	agents       []string
	state        SpreadState
	force        [][2]float64 // scratch, one per agent
	steps        int
	live         bool
	pcg          *rand.PCG
	rng          *rand.Rand
}

// SpreadState is the physical state of a SimpleSpread world.
type SpreadState struct {
	AgentPos    [][2]float64
	AgentVel    [][2]float64
	LandmarkPos [][2]float64
}

var _ api.Env = (*SimpleSpread)(nil)

// NewSimpleSpread returns a world of n agents and n landmarks whose episodes
// are truncated after maxCycles steps. Call Reset before Step.
func NewSimpleSpread(n, maxCycles int) (*SimpleSpread, error) {
	if n < 1 || n > spMaxAgents {
		return nil, fmt.Errorf("env: simple_spread with %d agents, want 1 to %d", n, spMaxAgents)
	}
	if maxCycles < 1 {
		return nil, fmt.Errorf("env: simple_spread max cycles %d, want >= 1", maxCycles)
	}
	s := &SimpleSpread{
		n:         n,
		maxCycles: maxCycles,
		agents:    make([]string, n),
		state: SpreadState{
			AgentPos:    make([][2]float64, n),
			AgentVel:    make([][2]float64, n),
			LandmarkPos: make([][2]float64, n),
		},
		force: make([][2]float64, n),
		pcg:   rand.NewPCG(0, pcgStream),
	}
	s.rng = rand.New(s.pcg)
	for i := range s.agents {
		s.agents[i] = "agent_" + strconv.Itoa(i)
	}
	return s, nil
}

// newSimpleSpreadEnv is the registry factory. It accepts "n_agents" and
// "max_cycles" (PettingZoo's names for N and the episode length).
func newSimpleSpreadEnv(cfg map[string]any) (api.Env, error) {
	c := api.Config(cfg)
	if err := c.CheckKeys("n_agents", "max_cycles"); err != nil {
		return nil, err
	}
	n, err := c.Int("n_agents", SimpleSpreadAgents)
	if err != nil {
		return nil, err
	}
	m, err := c.Int("max_cycles", SimpleSpreadMaxCycles)
	if err != nil {
		return nil, err
	}
	return NewSimpleSpread(n, m)
}

// obsDim is the length of one agent's observation.
func (s *SimpleSpread) obsDim() int { return 4 + 2*s.n + 2*(s.n-1) }

// Reset places agents and then landmarks uniformly in [-1, 1)^2, as MPE
// does, with agents at rest.
func (s *SimpleSpread) Reset(seed int64) ([][]float32, error) {
	s.pcg.Seed(uint64(seed), pcgStream)
	for i := range s.n {
		s.state.AgentPos[i] = [2]float64{s.uniform(), s.uniform()}
		s.state.AgentVel[i] = [2]float64{}
	}
	for i := range s.n {
		s.state.LandmarkPos[i] = [2]float64{s.uniform(), s.uniform()}
	}
	s.steps = 0
	s.live = true
	return s.observe(), nil
}

func (s *SimpleSpread) uniform() float64 { return -1 + 2*s.rng.Float64() }

// Step moves every agent by its action (see SpreadNoop and the others).
func (s *SimpleSpread) Step(actions []api.Action) (api.Step, error) {
	if !s.live {
		return api.Step{}, fmt.Errorf("env: simple_spread Step: %w", api.ErrNeedsReset)
	}
	if len(actions) != s.n {
		return api.Step{}, fmt.Errorf("env: simple_spread Step: got %d actions, want %d: %w", len(actions), s.n, api.ErrInvalidAction)
	}
	for i, a := range actions {
		var u [2]float64
		switch a.Discrete {
		case SpreadNoop:
		case SpreadLeft:
			u[0] = -1
		case SpreadRight:
			u[0] = 1
		case SpreadDown:
			u[1] = -1
		case SpreadUp:
			u[1] = 1
		default:
			return api.Step{}, fmt.Errorf("env: simple_spread Step: agent %d: action %d is not in [0, 5): %w", i, a.Discrete, api.ErrInvalidAction)
		}
		s.force[i] = [2]float64{u[0] * spSensitivity, u[1] * spSensitivity}
	}
	s.addContactForces()
	s.integrate()
	s.steps++

	reward := float32(s.reward())
	truncated := s.steps >= s.maxCycles
	s.live = !truncated

	out := api.Step{
		Obs:        s.observe(),
		Rewards:    make([]float32, s.n),
		Terminated: make([]bool, s.n),
		Truncated:  make([]bool, s.n),
	}
	for i := range s.n {
		out.Rewards[i] = reward
		out.Truncated[i] = truncated
	}
	return out, nil
}

// addContactForces adds MPE's soft collision force between every pair of
// agents (landmarks do not collide in this task): a push along the line
// between centres of contactForce * margin * log(1 + exp(-(dist -
// sizes)/margin)), which is about the overlap depth times contactForce
// when discs overlap and vanishes quickly when they do not.
func (s *SimpleSpread) addContactForces() {
	pos := s.state.AgentPos
	for a := range s.n {
		for b := a + 1; b < s.n; b++ {
			dx, dy := pos[a][0]-pos[b][0], pos[a][1]-pos[b][1]
			dist := math.Hypot(dx, dy)
			if dist == 0 {
				// MPE divides by zero here (NaN); coincident agents get
				// no push direction, so they get no push.
				continue
			}
			pen := spContactMargin * logAddExp0(-(dist-2*spAgentSize)/spContactMargin)
			fx, fy := spContactForce*dx/dist*pen, spContactForce*dy/dist*pen
			s.force[a][0] += fx
			s.force[a][1] += fy
			s.force[b][0] -= fx
			s.force[b][1] -= fy
		}
	}
}

// logAddExp0 returns log(exp(0) + exp(x)) without overflow, as
// numpy.logaddexp(0, x).
func logAddExp0(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// integrate advances velocities, then positions, as MPE's integrate_state:
// damping first, then the force, then the move with the new velocity.
func (s *SimpleSpread) integrate() {
	for i := range s.n {
		v := &s.state.AgentVel[i]
		p := &s.state.AgentPos[i]
		for k := range 2 {
			v[k] *= 1 - spDamping
			v[k] += s.force[i][k] / spMass * spDT
			p[k] += v[k] * spDT
		}
	}
}

// reward is the shared reward of the current state.
func (s *SimpleSpread) reward() float64 {
	pos := s.state.AgentPos
	r := 0.0
	for _, l := range s.state.LandmarkPos {
		nearest := math.Inf(1)
		for _, p := range pos {
			nearest = min(nearest, math.Hypot(p[0]-l[0], p[1]-l[1]))
		}
		r -= nearest
	}
	for a := range s.n {
		for b := a + 1; b < s.n; b++ {
			if math.Hypot(pos[a][0]-pos[b][0], pos[a][1]-pos[b][1]) < 2*spAgentSize {
				r--
			}
		}
	}
	return r
}

// observe returns every agent's observation, in one backing array.
func (s *SimpleSpread) observe() [][]float32 {
	d := s.obsDim()
	flat := make([]float32, s.n*d)
	obs := make([][]float32, s.n)
	st := &s.state
	for i := range s.n {
		o := flat[i*d : (i+1)*d : (i+1)*d]
		p := st.AgentPos[i]
		o = append(o[:0], float32(st.AgentVel[i][0]), float32(st.AgentVel[i][1]), float32(p[0]), float32(p[1]))
		for _, l := range st.LandmarkPos {
			o = append(o, float32(l[0]-p[0]), float32(l[1]-p[1]))
		}
		for j, q := range st.AgentPos {
			if j != i {
				o = append(o, float32(q[0]-p[0]), float32(q[1]-p[1]))
			}
		}
		obs[i] = o
	}
	return obs
}

// ObservationSpace is an unbounded Box of 4 + 2N + 2(N-1) values.
func (s *SimpleSpread) ObservationSpace() api.Space {
	inf := float32(math.Inf(1))
	return api.NewBox(-inf, inf, s.obsDim())
}

// ActionSpace is Discrete(5): no-op, left, right, down, up.
func (s *SimpleSpread) ActionSpace() api.Space { return api.NewDiscrete(5) }

// Agents returns "agent_0" to "agent_{N-1}".
func (s *SimpleSpread) Agents() []string { return append([]string(nil), s.agents...) }

// Close does nothing; SimpleSpread holds no resources.
func (s *SimpleSpread) Close() error { return nil }

// State returns a copy of the physical state.
func (s *SimpleSpread) State() SpreadState {
	return SpreadState{
		AgentPos:    append([][2]float64(nil), s.state.AgentPos...),
		AgentVel:    append([][2]float64(nil), s.state.AgentVel...),
		LandmarkPos: append([][2]float64(nil), s.state.LandmarkPos...),
	}
}

// SetState replaces the physical state (copying it) and makes the episode
// live, keeping the step count. It exists for tests and for replaying
// recorded states; training code uses Reset.
func (s *SimpleSpread) SetState(st SpreadState) error {
	if len(st.AgentPos) != s.n || len(st.AgentVel) != s.n || len(st.LandmarkPos) != s.n {
		return fmt.Errorf("env: simple_spread SetState: got %d positions, %d velocities and %d landmarks, want %d each",
			len(st.AgentPos), len(st.AgentVel), len(st.LandmarkPos), s.n)
	}
	copy(s.state.AgentPos, st.AgentPos)
	copy(s.state.AgentVel, st.AgentVel)
	copy(s.state.LandmarkPos, st.LandmarkPos)
	s.live = true
	return nil
}
