package minatar

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
)

// randomReturns plays episodes of a game with a uniform random policy over
// the full action set and the paper's settings (sticky actions 0.1,
// ramping) and returns the mean return, its standard error and the mean
// episode length.
func randomReturns(t testing.TB, name string, episodes int) (mean, stderr, length float64) {
	e := newEnv(t, name, DefaultOptions())
	rng := rand.New(rand.NewPCG(2019, 3176))
	actions := make([]api.Action, 1)
	var sum, sumSq, steps float64
	for ep := range episodes {
		if _, err := e.Reset(int64(ep)); err != nil {
			t.Fatal(err)
		}
		ret := 0.0
		for {
			actions[0].Discrete = int32(rng.IntN(int(NumActions)))
			s, err := e.Step(actions)
			if err != nil {
				t.Fatal(err)
			}
			ret += float64(s.Rewards[0])
			steps++
			if s.Done() {
				break
			}
		}
		sum += ret
		sumSq += ret * ret
	}
	n := float64(episodes)
	mean = sum / n
	return mean, math.Sqrt((sumSq/n - mean*mean) / (n - 1)), steps / n
}

// TestRandomPolicyBaseline measures each game's return under a uniform
// random policy, 200 episodes with fixed seeds, as the bar a learner must
// clear (docs/minatar.md lists the figures). The bounds are wide: they
// catch a game whose rules broke, not noise, since the figures are exact
// for these seeds.
func TestRandomPolicyBaseline(t *testing.T) {
	bounds := map[string][2]float64{
		"asterix":        {0.2, 1.5},
		"breakout":       {0.2, 2},
		"freeway":        {0, 0.5},
		"seaquest":       {0, 0.5},
		"space_invaders": {1.5, 6},
	}
	for _, name := range Games() {
		t.Run(name, func(t *testing.T) {
			mean, se, length := randomReturns(t, name, 200)
			t.Logf("%s: random policy return %.3f ± %.3f (standard error), %.1f steps an episode, 200 episodes", name, mean, se, length)
			if b := bounds[name]; mean < b[0] || mean > b[1] {
				t.Errorf("mean return %.3f outside [%v, %v]", mean, b[0], b[1])
			}
		})
	}
}
