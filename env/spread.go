package env

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
// The reward is computed after the step by one of three definitions
// ([SpreadReward]; docs/spread.md sets them side by side). The default,
// [SpreadRewardDistrl], gives every agent the same reward: minus the sum,
// over landmarks, of the distance to the nearest agent, minus 1 per pair of
// agents that collide (overlap). [SpreadRewardMAPPO] is the team reward of
// MPE and of the MAPPO code, quirks included; [SpreadRewardPettingZoo] is
// PettingZoo's simple_spread_v3 mix of a global and a per-agent part. All
// three have the same optimal behaviour; their returns differ.
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
	hits         []int        // scratch: each agent's collisions with the others
	rewardDef    SpreadReward
	localRatio   float64 // SpreadRewardPettingZoo's weight of the local part
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

// SpreadReward names a definition of SimpleSpread's reward, as the
// "reward" kwarg of the registered simple_spread.
type SpreadReward string

const (
	// SpreadRewardDistrl, the default: every agent gets -D - C, where D is
	// the sum over landmarks of the distance to the nearest agent and C the
	// number of colliding pairs.
	SpreadRewardDistrl SpreadReward = "distrl"
	// SpreadRewardMAPPO is MPE's reward as the MAPPO code
	// (marlbenchmark/on-policy) trains and reports it: agent i's own reward
	// is -D - k_i, where k_i counts the agents colliding with i including
	// i itself (MPE's is_collision(a, a) holds for any agent of positive
	// size), and every agent gets the sum over agents of those, -N*D - N -
	// 2C, since the scenario is collaborative (shared_reward).
	SpreadRewardMAPPO SpreadReward = "mappo"
	// SpreadRewardPettingZoo is PettingZoo's simple_spread_v3: agent i gets
	// (1 - local_ratio)*(-D) + local_ratio*(-c_i), where c_i counts the
	// other agents colliding with i; rewards differ between agents.
	SpreadRewardPettingZoo SpreadReward = "pettingzoo"

	// SpreadLocalRatio is PettingZoo's default local_ratio.
	SpreadLocalRatio = 0.5
)

// SpreadRewards lists the reward definitions SimpleSpread knows.
var SpreadRewards = []SpreadReward{SpreadRewardDistrl, SpreadRewardMAPPO, SpreadRewardPettingZoo}

// SpreadOption configures a SimpleSpread beyond its size.
type SpreadOption func(*SimpleSpread) error

// WithSpreadReward selects the reward definition (default
// SpreadRewardDistrl).
func WithSpreadReward(def SpreadReward) SpreadOption {
	return func(s *SimpleSpread) error {
		if !slices.Contains(SpreadRewards, def) {
			return fmt.Errorf("env: simple_spread reward %q, want one of %v", def, SpreadRewards)
		}
		s.rewardDef = def
		return nil
	}
}

// WithSpreadLocalRatio sets SpreadRewardPettingZoo's local_ratio, in [0, 1]
// as PettingZoo asserts (default SpreadLocalRatio). Other definitions have
// no local part, so asking for one with them is refused when the
// environment is built.
func WithSpreadLocalRatio(r float64) SpreadOption {
	return func(s *SimpleSpread) error {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("env: simple_spread local_ratio %v, want it in [0, 1]", r)
		}
		s.localRatio = r
		return nil
	}
}

// NewSimpleSpread returns a world of n agents and n landmarks whose episodes
// are truncated after maxCycles steps. Call Reset before Step.
func NewSimpleSpread(n, maxCycles int, opts ...SpreadOption) (*SimpleSpread, error) {
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
		force:      make([][2]float64, n),
		hits:       make([]int, n),
		rewardDef:  SpreadRewardDistrl,
		localRatio: math.NaN(), // unset: see below
		pcg:        rand.NewPCG(0, pcgStream),
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	switch {
	case math.IsNaN(s.localRatio) && s.rewardDef == SpreadRewardPettingZoo:
		s.localRatio = SpreadLocalRatio
	case !math.IsNaN(s.localRatio) && s.rewardDef != SpreadRewardPettingZoo:
		return nil, fmt.Errorf("env: simple_spread local_ratio set with reward %q: only %q has a local part", s.rewardDef, SpreadRewardPettingZoo)
	}
	s.rng = rand.New(s.pcg)
	for i := range s.agents {
		s.agents[i] = "agent_" + strconv.Itoa(i)
	}
	return s, nil
}

// newSimpleSpreadEnv is the registry factory. It accepts "n_agents" and
// "max_cycles" (PettingZoo's names for N and the episode length), "reward"
// (a SpreadReward) and "local_ratio" (with reward "pettingzoo" only).
func newSimpleSpreadEnv(cfg map[string]any) (api.Env, error) {
	c := api.Config(cfg)
	if err := c.CheckKeys("n_agents", "max_cycles", "reward", "local_ratio"); err != nil {
		return nil, err
	}
	def, err := c.String("reward", string(SpreadRewardDistrl))
	if err != nil {
		return nil, err
	}
	opts := []SpreadOption{WithSpreadReward(SpreadReward(def))}
	if _, ok := cfg["local_ratio"]; ok {
		r, err := c.Float("local_ratio", SpreadLocalRatio)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithSpreadLocalRatio(r))
	}
	n, err := c.Int("n_agents", SimpleSpreadAgents)
	if err != nil {
		return nil, err
	}
	m, err := c.Int("max_cycles", SimpleSpreadMaxCycles)
	if err != nil {
		return nil, err
	}
	return NewSimpleSpread(n, m, opts...)
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

	truncated := s.steps >= s.maxCycles
	s.live = !truncated

	out := api.Step{
		Obs:        s.observe(),
		Rewards:    make([]float32, s.n),
		Terminated: make([]bool, s.n),
		Truncated:  make([]bool, s.n),
	}
	for i, r := range s.Rewards() {
		out.Rewards[i] = float32(r)
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

// collides is MPE's is_collision for two agents whose centres are dist
// apart: they overlap. It holds for an agent and itself (dist 0), which is
// where MPE's constant self-collision term comes from.
func collides(dist float64) bool { return dist < 2*spAgentSize }

// coverage is the distance term common to every definition: 0 minus, landmark
// by landmark, the distance to its nearest agent, accumulated in MPE's order.
func (s *SimpleSpread) coverage() float64 {
	r := 0.0
	for _, l := range s.state.LandmarkPos {
		nearest := math.Inf(1)
		for _, p := range s.state.AgentPos {
			nearest = min(nearest, math.Hypot(p[0]-l[0], p[1]-l[1]))
		}
		r -= nearest
	}
	return r
}

// countHits fills s.hits with each agent's number of collisions with the
// other agents and returns the number of colliding pairs.
func (s *SimpleSpread) countHits() int {
	pos := s.state.AgentPos
	clear(s.hits)
	pairs := 0
	for a := range s.n {
		for b := a + 1; b < s.n; b++ {
			if collides(math.Hypot(pos[a][0]-pos[b][0], pos[a][1]-pos[b][1])) {
				s.hits[a]++
				s.hits[b]++
				pairs++
			}
		}
	}
	return pairs
}

// penalize subtracts 1 from r k times, one collision at a time as MPE and
// PettingZoo do, so that the floating-point result is theirs.
func penalize(r float64, k int) float64 {
	for range k {
		r--
	}
	return r
}

// reward is the SpreadRewardDistrl reward of the current state.
func (s *SimpleSpread) reward() float64 { return penalize(s.coverage(), s.countHits()) }

// Rewards returns every agent's reward in the current state under the
// environment's definition (see SpreadReward), in float64; Step returns the
// same values as float32.
func (s *SimpleSpread) Rewards() []float64 {
	out := make([]float64, s.n)
	switch s.rewardDef {
	case SpreadRewardMAPPO:
		cov := s.coverage()
		s.countHits()
		self := 0
		if collides(0) {
			self = 1
		}
		// environment.py: reward = np.sum(reward_n), given to every agent.
		team := 0.0
		for i := range s.n {
			team += penalize(cov, s.hits[i]+self)
		}
		for i := range out {
			out[i] = team
		}
	case SpreadRewardPettingZoo:
		global := s.coverage()
		s.countHits()
		// simple_env.py: global*(1 - local_ratio) + local*local_ratio.
		for i := range out {
			out[i] = global*(1-s.localRatio) + penalize(0, s.hits[i])*s.localRatio
		}
	default:
		r := s.reward()
		for i := range out {
			out[i] = r
		}
	}
	return out
}

// RewardDef returns the environment's reward definition.
func (s *SimpleSpread) RewardDef() SpreadReward { return s.rewardDef }

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
