package env_test

import (
	"errors"
	"math"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
)

const tol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }

func checkState(t *testing.T, step int, got, want [4]float64) {
	t.Helper()
	for i := range got {
		if !near(got[i], want[i]) {
			t.Fatalf("step %d: state %v, want %v", step, got, want)
		}
	}
}

func newCartPole(t *testing.T) *env.CartPole {
	t.Helper()
	c, err := env.NewCartPole(env.CartPoleMaxSteps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func stepCP(t *testing.T, c *env.CartPole, a int32) api.Step {
	t.Helper()
	s, err := c.Step([]api.Action{{Discrete: a}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCartPoleHandWorked checks three steps from rest against values worked
// out by hand from Gymnasium's CartPole-v1 equations. Constants: g = 9.8,
// m_pole = 0.1, total_mass = 1.1, l = 0.5, polemass_length = 0.05,
// tau = 0.02.
func TestCartPoleHandWorked(t *testing.T) {
	c := newCartPole(t)
	c.SetState([4]float64{0, 0, 0, 0})

	// Step 1, action 1 (force +10), theta = 0 so sin = 0, cos = 1:
	//   temp     = (10 + 0.05*0*0)/1.1             = 100/11
	//   thetaacc = (9.8*0 - 1*100/11) / (0.5*(4/3 - 0.1*1/1.1))
	//            = -(100/11) / (0.5*41/33) = -(100/11)*(66/41) = -600/41 ≈ -14.634146341463415
	//   xacc     = 100/11 - 0.05*(-600/41)*1/1.1 = 100/11 + 300/451 = 400/41 ≈ 9.75609756097561
	//   x = 0 + 0.02*0 = 0; x_dot = 0.02*400/41 = 8/41
	//   theta = 0 + 0.02*0 = 0; theta_dot = 0.02*(-600/41) = -12/41
	s := stepCP(t, c, 1)
	checkState(t, 1, c.State(), [4]float64{0, 0.1951219512195122, 0, -0.2926829268292683})
	if s.Rewards[0] != 1 || s.Terminated[0] || s.Truncated[0] {
		t.Fatalf("step 1: %+v", s)
	}
	wantObs := []float32{0, 0.19512195, 0, -0.29268292}
	for i, v := range s.Obs[0] {
		if v != wantObs[i] {
			t.Fatalf("step 1: obs %v, want %v", s.Obs[0], wantObs)
		}
	}

	// Step 2, action 1: theta is still 0, so the accelerations repeat
	// (xacc = 400/41, thetaacc = -600/41); positions move with the old
	// velocities:
	//   x = 0 + 0.02*8/41 = 0.16/41;  x_dot = 8/41 + 8/41 = 16/41
	//   theta = 0 + 0.02*(-12/41) = -0.24/41;  theta_dot = -24/41
	stepCP(t, c, 1)
	checkState(t, 2, c.State(), [4]float64{0.0039024390243902443, 0.3902439024390244, -0.005853658536585366, -0.5853658536585366})

	// Step 3, action 0 (force -10), theta = -0.24/41:
	//   sin(theta) = -0.005853625107063847, cos(theta) = 0.9999828673897898
	//   temp     = (-10 + 0.05*(24/41)^2*sin)/1.1                       = -9.091000261966947
	//   thetaacc = (9.8*sin - cos*temp) / (0.5*(4/3 - 0.1*cos^2/1.1))  = 14.541661416937938
	//   xacc     = temp - 0.05*thetaacc*cos/1.1                         = -9.751973547436087
	//   x = 0.16/41 + 0.02*16/41 = 0.48/41
	//   x_dot = 16/41 + 0.02*(-9.751973547436087)        = 0.19520443149030264
	//   theta = -0.24/41 + 0.02*(-24/41) = -0.72/41
	//   theta_dot = -24/41 + 0.02*14.541661416937938    = -0.2945326253197778
	stepCP(t, c, 0)
	checkState(t, 3, c.State(), [4]float64{0.011707317073170733, 0.19520443149030264, -0.0175609756097561, -0.2945326253197778})
}

// referenceStep is a second, plain transcription of the published
// CartPole-v1 step, used to cross-check whole episodes.
func referenceStep(s [4]float64, action int) [4]float64 {
	const (
		gravity, massPole, massCart, halfLength, forceMag, tau = 9.8, 0.1, 1.0, 0.5, 10.0, 0.02
	)
	x, xDot, theta, thetaDot := s[0], s[1], s[2], s[3]
	force := forceMag
	if action == 0 {
		force = -forceMag
	}
	totalMass := massPole + massCart
	poleMassLength := massPole * halfLength
	cosT, sinT := math.Cos(theta), math.Sin(theta)
	temp := (force + poleMassLength*thetaDot*thetaDot*sinT) / totalMass
	thetaAcc := (gravity*sinT - cosT*temp) / (halfLength * (4.0/3.0 - massPole*cosT*cosT/totalMass))
	xAcc := temp - poleMassLength*thetaAcc*cosT/totalMass
	return [4]float64{x + tau*xDot, xDot + tau*xAcc, theta + tau*thetaDot, thetaDot + tau*thetaAcc}
}

// TestCartPoleEpisodeLength runs fixed policies from fixed states to
// termination. The step counts were computed independently with a Python
// transcription of Gymnasium's CartPoleEnv.step; referenceStep re-checks
// every state on the way.
func TestCartPoleEpisodeLength(t *testing.T) {
	tests := []struct {
		name   string
		init   [4]float64
		policy func(step int) int
		steps  int
	}{
		{"always right from rest", [4]float64{}, func(int) int { return 1 }, 9},
		{"always left from rest", [4]float64{}, func(int) int { return 0 }, 9},
		{"always right from a tilt", [4]float64{0.01, -0.02, 0.03, -0.04}, func(int) int { return 1 }, 10},
		{"alternating from rest", [4]float64{}, func(i int) int { return 1 - i%2 }, 33},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCartPole(t)
			c.SetState(tc.init)
			ref := tc.init
			for i := range tc.steps {
				a := tc.policy(i)
				s := stepCP(t, c, int32(a))
				ref = referenceStep(ref, a)
				checkState(t, i+1, c.State(), ref)
				last := i == tc.steps-1
				if s.Terminated[0] != last || s.Truncated[0] || s.Rewards[0] != 1 {
					t.Fatalf("step %d: terminated=%v truncated=%v reward=%v, want terminated=%v",
						i+1, s.Terminated[0], s.Truncated[0], s.Rewards[0], last)
				}
				for k, v := range s.Obs[0] {
					if v != float32(c.State()[k]) {
						t.Fatalf("step %d: obs %v is not the float32 state %v", i+1, s.Obs[0], c.State())
					}
				}
			}
			if _, err := c.Step([]api.Action{{Discrete: 1}}); !errors.Is(err, api.ErrNeedsReset) {
				t.Errorf("Step after termination = %v, want ErrNeedsReset", err)
			}
		})
	}
}

// balance is a simple controller that keeps the pole up for 500 steps from
// any reset state.
func balance(obs []float32) int32 {
	if obs[2]+0.5*obs[3] > 0 {
		return 1
	}
	return 0
}

func TestCartPoleTruncation(t *testing.T) {
	for _, limit := range []int{5, env.CartPoleMaxSteps} {
		c, err := env.NewCartPole(limit)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := c.Reset(7)
		if err != nil {
			t.Fatal(err)
		}
		o := obs[0]
		for i := 1; i <= limit; i++ {
			s := stepCP(t, c, balance(o))
			o = s.Obs[0]
			if s.Terminated[0] {
				t.Fatalf("limit %d: terminated at step %d", limit, i)
			}
			if s.Truncated[0] != (i == limit) {
				t.Fatalf("limit %d: step %d truncated=%v", limit, i, s.Truncated[0])
			}
		}
		if _, err := c.Step([]api.Action{{Discrete: 0}}); !errors.Is(err, api.ErrNeedsReset) {
			t.Errorf("Step after truncation = %v, want ErrNeedsReset", err)
		}
		if _, err := c.Reset(8); err != nil {
			t.Fatal(err)
		}
		stepCP(t, c, 0) // live again after Reset
	}
	if _, err := env.NewCartPole(0); err == nil {
		t.Error("NewCartPole(0) succeeded")
	}
}

func TestCartPoleReset(t *testing.T) {
	c := newCartPole(t)
	a, _ := c.Reset(42)
	stepCP(t, c, 1)
	b, _ := c.Reset(42)
	if len(a) != 1 || len(a[0]) != 4 {
		t.Fatalf("Reset returned %v, want one observation of 4", a)
	}
	for i := range a[0] {
		if a[0][i] != b[0][i] {
			t.Fatalf("same seed, different states: %v vs %v", a[0], b[0])
		}
	}
	seen := map[[4]float32]bool{}
	for seed := range int64(200) {
		obs, _ := c.Reset(seed)
		var key [4]float32
		for i, v := range obs[0] {
			if v < -0.05 || v >= 0.05 {
				t.Fatalf("seed %d: initial state %v outside [-0.05, 0.05)", seed, obs[0])
			}
			key[i] = v
		}
		seen[key] = true
	}
	if len(seen) != 200 {
		t.Errorf("200 seeds gave %d distinct initial states", len(seen))
	}
}

func TestCartPoleInvalidStep(t *testing.T) {
	c := newCartPole(t)
	if _, err := c.Step([]api.Action{{Discrete: 0}}); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("Step before Reset = %v, want ErrNeedsReset", err)
	}
	if _, err := c.Reset(1); err != nil {
		t.Fatal(err)
	}
	for _, actions := range [][]api.Action{nil, {{Discrete: 0}, {Discrete: 1}}, {{Discrete: 2}}, {{Discrete: -1}}} {
		if _, err := c.Step(actions); !errors.Is(err, api.ErrInvalidAction) {
			t.Errorf("Step(%v) = %v, want ErrInvalidAction", actions, err)
		}
	}
	stepCP(t, c, 1) // an invalid action does not end the episode
}

func TestCartPoleSpaces(t *testing.T) {
	c := newCartPole(t)
	obsSpace, as := c.ObservationSpace(), c.ActionSpace()
	if err := obsSpace.Validate(); err != nil {
		t.Fatal(err)
	}
	// Gymnasium: high = [2.4*2, finfo(float32).max, 12*2*pi/360*2, finfo(float32).max].
	wantHigh := []float32{4.8, math.MaxFloat32, 0.41887903, math.MaxFloat32}
	for i, h := range obsSpace.High {
		if h != wantHigh[i] || obsSpace.Low[i] != -h {
			t.Errorf("bounds %v..%v, want ±%v", obsSpace.Low, obsSpace.High, wantHigh)
			break
		}
	}
	if as.Kind != api.Discrete || as.N != 2 || obsSpace.Size() != 4 {
		t.Errorf("spaces %+v, %+v", obsSpace, as)
	}
	obs, _ := c.Reset(3)
	if !obsSpace.Contains(obs[0]) {
		t.Errorf("initial observation %v outside %+v", obs[0], obsSpace)
	}
	if got := c.Agents(); len(got) != 1 || got[0] != "agent_0" {
		t.Errorf("Agents() = %v", got)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func BenchmarkCartPoleStep(b *testing.B) {
	c, err := env.NewCartPole(env.CartPoleMaxSteps)
	if err != nil {
		b.Fatal(err)
	}
	obs, _ := c.Reset(0)
	o := obs[0]
	actions := make([]api.Action, 1)
	seed := int64(0)
	for b.Loop() {
		actions[0].Discrete = balance(o)
		s, err := c.Step(actions)
		if err != nil {
			b.Fatal(err)
		}
		o = s.Obs[0]
		if s.Terminated[0] || s.Truncated[0] {
			seed++
			obs, _ = c.Reset(seed)
			o = obs[0]
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// TestCartPoleStepDoesNotAllocate pins that a step reuses the CartPole's
// own Step (api.Env allows it): an allocation a step was a tenth of an
// actor's CPU on CartPole.
func TestCartPoleStepDoesNotAllocate(t *testing.T) {
	c, err := env.NewCartPole(env.CartPoleMaxSteps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reset(1); err != nil {
		t.Fatal(err)
	}
	actions := []api.Action{{Discrete: 0}}
	seed := int64(1)
	step := func() {
		s, err := c.Step(actions)
		if err != nil {
			t.Fatal(err)
		}
		actions[0].Discrete = 1 - actions[0].Discrete // keep the pole up for long episodes
		if s.Done() {
			seed++
			if _, err := c.Reset(seed); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Resets allocate their observation; a few hundred steps hold about
	// one episode of alternating pushes, so count steps only.
	for range 3 {
		if got := testing.AllocsPerRun(50, step); got > 0.5 {
			t.Fatalf("a step allocates %.2f times, want 0", got)
		}
	}
}
