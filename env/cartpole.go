package env

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/distrl/distrl/api"
)

// CartPole-v1 constants, as in Gymnasium's classic_control/cartpole.py.
const (
	cpGravity        = 9.8
	cpMassCart       = 1.0
	cpMassPole       = 0.1
	cpTotalMass      = cpMassPole + cpMassCart
	cpLength         = 0.5 // half the pole's length
	cpPoleMassLength = cpMassPole * cpLength
	cpForceMag       = 10.0
	cpTau            = 0.02 // seconds between state updates
	cpXThreshold     = 2.4

	// CartPoleMaxSteps is CartPole-v1's time limit.
	CartPoleMaxSteps = 500
)

// cpThetaThreshold is 12 degrees in radians, computed in float64 arithmetic
// at run time: a Go constant expression would be evaluated exactly and round
// one ulp away from Gymnasium's 12 * 2 * math.pi / 360.
var cpThetaThreshold = func() float64 {
	pi := math.Pi
	return 12 * 2 * pi / 360
}()

// pcgStream is the fixed second word of the PCG seed; the episode seed is
// the first.
const pcgStream = 0x9e3779b97f4a7c15

// CartPole is Gymnasium's CartPole-v1: a pole hinged on a cart that the
// agent pushes left (action 0) or right (action 1) with a force of 10 N.
// The observation is (x, x_dot, theta, theta_dot); every step earns reward
// 1, including the last; the episode terminates when |x| > 2.4 or
// |theta| > 12 degrees and is truncated after 500 steps.
//
// Dynamics use Euler integration in float64 with Gymnasium's order of
// operations (trajectories agree to the last bit but for sin and cos, where
// Go's math package and C's libm may differ by an ulp), and observations
// are rounded to float32 as Gymnasium does. Reset draws the initial state
// uniformly from [-0.05, 0.05)^4 with a PCG generator seeded from the seed:
// the distribution is Gymnasium's, but a given seed yields different
// initial states than NumPy's generator would.
type CartPole struct {
	state    [4]float64 // x, x_dot, theta, theta_dot
	steps    int
	maxSteps int
	live     bool // an episode is in progress
	pcg      *rand.PCG
	rng      *rand.Rand
	out      cartPoleStep // what Step returns, reused (api.Env)
}

var _ api.Env = (*CartPole)(nil)

// NewCartPole returns a CartPole truncated after maxSteps steps
// ([CartPoleMaxSteps] for CartPole-v1). Call Reset before Step.
func NewCartPole(maxSteps int) (*CartPole, error) {
	if maxSteps < 1 {
		return nil, fmt.Errorf("env: CartPole max steps %d, want >= 1", maxSteps)
	}
	pcg := rand.NewPCG(0, pcgStream)
	return &CartPole{maxSteps: maxSteps, pcg: pcg, rng: rand.New(pcg)}, nil
}

// newCartPoleEnv is the registry factory. It accepts "max_episode_steps".
func newCartPoleEnv(cfg map[string]any) (api.Env, error) {
	c := api.Config(cfg)
	if err := c.CheckKeys("max_episode_steps"); err != nil {
		return nil, err
	}
	n, err := c.Int("max_episode_steps", CartPoleMaxSteps)
	if err != nil {
		return nil, err
	}
	return NewCartPole(n)
}

// Reset starts a new episode from a random state drawn with the seed.
func (c *CartPole) Reset(seed int64) ([][]float32, error) {
	c.pcg.Seed(uint64(seed), pcgStream)
	for i := range c.state {
		c.state[i] = -0.05 + 0.1*c.rng.Float64()
	}
	c.steps = 0
	c.live = true
	obs := make([]float32, 4)
	c.observe(obs)
	return [][]float32{obs}, nil
}

// cartPoleStep holds everything one Step returns. It is the CartPole's
// own, valid until the next Step or Reset as api.Env allows: an allocation
// a step was a tenth of an actor's stepping of CartPole.
type cartPoleStep struct {
	obs              [4]float32
	obsRows          [1][]float32
	reward           [1]float32
	terminated, trun [1]bool
}

// Step pushes the cart: actions must hold one Discrete action, 0 (left) or
// 1 (right). The Step returned is the CartPole's memory, valid until the
// next Step or Reset.
func (c *CartPole) Step(actions []api.Action) (api.Step, error) {
	if !c.live {
		return api.Step{}, fmt.Errorf("env: CartPole.Step: %w", api.ErrNeedsReset)
	}
	if len(actions) != 1 {
		return api.Step{}, fmt.Errorf("env: CartPole.Step: got %d actions, want 1: %w", len(actions), api.ErrInvalidAction)
	}
	a := actions[0].Discrete
	if a != 0 && a != 1 {
		return api.Step{}, fmt.Errorf("env: CartPole.Step: action %d is not 0 or 1: %w", a, api.ErrInvalidAction)
	}

	force := -cpForceMag
	if a == 1 {
		force = cpForceMag
	}
	x, xDot, theta, thetaDot := c.state[0], c.state[1], c.state[2], c.state[3]
	sin, cos := math.Sincos(theta)
	// The grouping of every product follows Gymnasium's source (np.square
	// first) so that float64 rounding matches it; only sin and cos may
	// differ from C's libm in the last bit.
	temp := (force + cpPoleMassLength*(thetaDot*thetaDot)*sin) / cpTotalMass
	thetaAcc := (cpGravity*sin - cos*temp) / (cpLength * (4.0/3.0 - cpMassPole*(cos*cos)/cpTotalMass))
	xAcc := temp - cpPoleMassLength*thetaAcc*cos/cpTotalMass
	// Euler: positions advance with the velocities from before the step.
	c.state = [4]float64{
		x + cpTau*xDot,
		xDot + cpTau*xAcc,
		theta + cpTau*thetaDot,
		thetaDot + cpTau*thetaAcc,
	}
	c.steps++

	terminated := math.Abs(c.state[0]) > cpXThreshold || math.Abs(c.state[2]) > cpThetaThreshold
	// Like Gymnasium's TimeLimit, both flags are set when the limit is hit
	// on a terminal step.
	truncated := c.steps >= c.maxSteps
	c.live = !terminated && !truncated

	out := &c.out
	c.observe(out.obs[:])
	out.obsRows[0] = out.obs[:]
	out.reward[0] = 1
	out.terminated[0] = terminated
	out.trun[0] = truncated
	return api.Step{Obs: out.obsRows[:], Rewards: out.reward[:], Terminated: out.terminated[:], Truncated: out.trun[:]}, nil
}

func (c *CartPole) observe(dst []float32) {
	for i, v := range c.state {
		dst[i] = float32(v)
	}
}

// ObservationSpace is Gymnasium's: Box(4) bounded by ±4.8 for x, ±24
// degrees for theta and ±MaxFloat32 for the velocities.
func (c *CartPole) ObservationSpace() api.Space {
	high := []float32{2 * cpXThreshold, math.MaxFloat32, float32(2 * cpThetaThreshold), math.MaxFloat32}
	low := make([]float32, len(high))
	for i, h := range high {
		low[i] = -h
	}
	return api.Space{Kind: api.Box, Shape: []int{4}, Low: low, High: high}
}

// ActionSpace is Discrete(2).
func (c *CartPole) ActionSpace() api.Space { return api.NewDiscrete(2) }

// Agents returns the single agent's id, "agent_0".
func (c *CartPole) Agents() []string { return []string{"agent_0"} }

// Close does nothing; CartPole holds no resources.
func (c *CartPole) Close() error { return nil }

// State returns the physical state (x, x_dot, theta, theta_dot) in float64.
func (c *CartPole) State() [4]float64 { return c.state }

// SetState replaces the physical state (x, x_dot, theta, theta_dot) and
// makes the episode live, keeping the step count (if the time limit has
// passed, the next Step is truncated). It exists for tests and
// for replaying recorded states; training code uses Reset.
func (c *CartPole) SetState(s [4]float64) {
	c.state = s
	c.live = true
}
